"""Daily digests: each channel that asked (`/rl-session digest`) gets, at its
local time, its watched sessions and the last day's status changes. The
channel's settings row is locked while its digest is queued, so one replica
queues it, once a day."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from bot.outbox.contract.payloads import (
    DigestChange,
    DigestPayload,
    DigestSession,
    RootPayload,
    TransitionPayload,
    read_payload,
)
from bot.outbox.contract.rows import digest_row
from bot.outbox.history import status_rows
from bot.outbox.queue import insert_outbox
from bot.runtime import Runtime
from bot.store.queries.channel_settings import digest_settings
from bot.store.queries.subscriptions import channel_watched
from bot.store.session import Db
from bot.store.tables import ChannelSettings, database_now
from bot.training.snapshots import SessionSnapshot
from bot.training.status import short_status

log = logging.getLogger(__name__)

#: a digest missed by more than this waits for tomorrow
DIGEST_WINDOW = timedelta(hours=1)


def _local_now(zone: str, now: datetime) -> datetime:
    try:
        tz = ZoneInfo(zone)
    except (KeyError, ValueError):
        tz = ZoneInfo("UTC")
    return now.replace(tzinfo=ZoneInfo("UTC")).astimezone(tz)


def digest_due(setting: ChannelSettings, now: datetime) -> str | None:
    """The local date whose digest is due now, or None."""
    if not setting.digest_time:
        return None
    local = _local_now(setting.digest_tz, now)
    hh, mm = (int(p) for p in setting.digest_time.split(":"))
    at = local.replace(hour=hh, minute=mm, second=0, microsecond=0)
    if at > local:  # the window of yesterday's digest may run past midnight
        at -= timedelta(days=1)
    day = at.date().isoformat()
    if at <= local < at + DIGEST_WINDOW and setting.last_digest_on != day:
        return day
    return None


async def send_digests(rt: Runtime) -> int:
    """Queue each due channel's digest in the outbox (delivery sends it).

    Due by the database's clock, as the outbox rows it counts are stamped: a
    replica whose clock is off by an hour would otherwise miss the window."""
    queued = 0
    async with rt.sessionmaker() as db, db.begin():
        now = await database_now(db)
        settings = await digest_settings(db)
        for setting in settings:
            day = digest_due(setting, now)
            if day is None:
                continue
            digest = await digest_of_channel(db, setting, day, now)
            await insert_outbox(
                db,
                [
                    digest_row(
                        team_id=setting.team_id,
                        channel_id=setting.channel_id,
                        day=day,
                        sessions=digest.sessions,
                        changes=digest.changes,
                    )
                ],
            )
            setting.last_digest_on = day
            queued += 1
    return queued


async def digest_of_channel(
    db: Db, setting: ChannelSettings, day: str, now: datetime
) -> DigestPayload:
    """What a channel's digest says: its watched sessions now, and the last
    24 hours' status changes (told, or muted or filtered and shown on the card
    only: both `transition` and `root` rows; a `root` row is also written for a
    mere redraw, which is no change). Rendered when it is sent."""
    watched = await channel_watched(db, team_id=setting.team_id, channel_id=setting.channel_id)
    sessions = [
        DigestSession(session_id=sid, display_name=_display(snapshot), status=status)
        for sid, snapshot, status in watched
    ]
    rows = await status_rows(db, setting.channel_id, since=now - timedelta(hours=24))
    changes = []
    for sid, kind, payload in rows:
        try:
            change = read_payload(kind, payload)
        except (ValueError, TypeError):  # a row no longer readable says nothing of the day
            log.warning("digest skipped an unreadable outbox row", extra={"session_id": sid})
            continue
        if not isinstance(change, TransitionPayload | RootPayload) or not _is_change(change):
            continue
        changes.append(
            DigestChange(
                name=(change.session.display_name if change.session else None) or str(sid),
                old_status=change.old_status,
                new_status=change.new_status,
            )
        )
    return DigestPayload(day=day, sessions=sessions, changes=changes)


def _is_change(change: TransitionPayload | RootPayload) -> bool:
    """A status change, told or shown on the card only; not a redraw of the card
    (the spend watch's, whose status is the one it had)."""
    return change.gone or short_status(change.old_status) != short_status(change.new_status)


def _display(snapshot: SessionSnapshot | None) -> str | None:
    return snapshot.display_name if snapshot is not None else None
