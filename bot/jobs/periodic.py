"""Periodic jobs that one replica at a time should run: org-wide error watch and
daily digests. A `jobs` row is the lock: claimed with SKIP LOCKED and a lease."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.outbox.contract.payloads import (
    DigestChange,
    DigestPayload,
    DigestSession,
    Kind,
    RootPayload,
    TransitionPayload,
    read_payload,
)
from bot.outbox.contract.rows import State, digest_row, oncall_key, oncall_row
from bot.outbox.queue import OutboxMessage, insert_outbox, remember_alerts, unalerted
from bot.runtime import Runtime
from bot.store.job_locks import claim_job, release_job
from bot.store.tables import (
    AlertSent,
    ChannelSettings,
    Subscription,
    WatchedSession,
    utcnow,
)
from bot.together.list_pass import Lister
from bot.training.sessions import TrainingSession
from bot.training.status import STATUS_PREFIX, Status

log = logging.getLogger(__name__)
DIGEST_WINDOW = timedelta(hours=1)
# A watch idle longer than this was switched off, not briefly down: start afresh.
WATCH_RESTART_AFTER = timedelta(hours=1)  # a digest missed by more than this waits for tomorrow
# Together's timestamps come from Together's clock, whole seconds at times; the baseline
# from ours. An error stamped this little before the baseline is still news: whatever
# the baseline run itself listed is remembered as history, so this re-pages nothing.
BASELINE_CLOCK_SLACK = timedelta(seconds=60)


def _naive_utc(dt: datetime | None) -> datetime | None:
    if dt is None:
        return None
    return dt.astimezone(ZoneInfo("UTC")).replace(tzinfo=None) if dt.tzinfo else dt


async def watch_all_errors(rt: Runtime, *, lister: Lister | None = None) -> int:
    """Alert on-call for any session that entered ERROR since the watch began,
    subscribed or not; each error once (the alert's dedupe key is the error).

    What was alerted is remembered in `alerts_sent`, not only in the outbox
    (which is pruned), and the errors listed on the run that sets the baseline
    are remembered as history, so neither is ever paged (again). The pages come
    through `lister` (the process's own by default), shared with any other consumer
    of the same pages: `ls error` and the poller, which takes a watched session's
    final state from them."""
    settings = rt.settings
    lister = lister or rt.lister
    if not settings.oncall_channel:
        return 0
    async with rt.sessionmaker() as db, db.begin():
        job = await claim_job(db, "watch_all_errors", owner=rt.owner, lease=settings.lease_seconds)
        if job is None:
            return 0
        now = utcnow()
        idle = now - job.last_run_at if job.last_run_at else None
        starting = job.baseline_at is None or (idle is not None and idle > WATCH_RESTART_AFTER)
        if starting:
            # Errors from before the watch began (or was switched back on) are history.
            job.baseline_at = now
        baseline = job.baseline_at or now
    listed = await lister.get(
        [STATUS_PREFIX + Status.ERROR.value],
        max_pages=settings.watch_all_max_pages,
        # Shared with a pass of the same pages begun within half the shortest interval.
        since=lister.clock()
        - min(settings.poll_interval_seconds, settings.poll_min_interval_seconds) / 2,
    )
    if listed.error is not None:
        log.warning("org-wide error watch could not list sessions: %s", listed.error)
    elif not listed.complete and listed.pages >= settings.watch_all_max_pages:
        log.info(
            "org-wide error watch stopped at WATCH_ALL_MAX_PAGES=%d with more pages left",
            settings.watch_all_max_pages,
        )
    errors = [s for s in listed.sessions() if s.status_enum is Status.ERROR]
    candidates = [
        s
        for s in errors
        if not starting
        and (when := _naive_utc((s.error.occurred_at if s.error else None) or s.updated_at))
        and when >= baseline - BASELINE_CLOCK_SLACK
    ]
    async with rt.sessionmaker() as db, db.begin():
        now = utcnow()
        if starting:
            await remember_alerts(db, [_Memo.of(s) for s in errors], now=now, alerted=False)
        fresh = [
            memo.session for memo in await unalerted(db, [_Memo.of(s) for s in candidates], now=now)
        ]
        if fresh:
            threads: dict[str, Any] = {}
            subs = await db.execute(
                select(Subscription.session_id, Subscription.channel_id, Subscription.root_ts)
                .where(Subscription.session_id.in_([s.id for s in fresh]))
                .order_by(Subscription.id)
            )
            for row in subs:
                threads.setdefault(row.session_id, row)
            rows = [
                oncall_row(
                    settings.oncall_channel,
                    s,
                    seq=None,
                    thread_channel=threads[s.id].channel_id if s.id in threads else None,
                    thread_ts=threads[s.id].root_ts if s.id in threads else None,
                )
                for s in fresh
            ]
            await insert_outbox(db, rows)
        if errors:  # still listed in ERROR: the memory of these alerts still matters
            await db.execute(
                update(AlertSent)
                .where(AlertSent.key.in_([oncall_key(s, None) for s in errors]))
                .values(last_seen_at=now)
                .execution_options(synchronize_session=False)
            )
        await release_job(db, "watch_all_errors", owner=rt.owner)
    return len(fresh)


@dataclass(frozen=True)
class _Memo:
    """What `alerts_sent` keeps of an error (and the session, for the caller)."""

    dedupe_key: str
    session_id: str
    session: TrainingSession

    @classmethod
    def of(cls, session: TrainingSession) -> _Memo:
        return cls(oncall_key(session, None), session.id, session)


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
    """Queue each due channel's digest in the outbox (delivery sends it)."""
    now = utcnow()
    queued = 0
    async with rt.sessionmaker() as db, db.begin():
        settings = (
            await db.execute(
                select(ChannelSettings)
                .where(ChannelSettings.digest_time.is_not(None))
                .with_for_update(skip_locked=True)
            )
        ).scalars()
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
    db: AsyncSession, setting: ChannelSettings, day: str, now: datetime
) -> DigestPayload:
    """What a channel's digest says: its watched sessions now, and the last
    24 hours' status changes (told or not). Rendered when it is sent."""
    watched = await db.execute(
        select(Subscription.session_id, WatchedSession.snapshot, WatchedSession.last_status)
        .join(WatchedSession, WatchedSession.session_id == Subscription.session_id)
        .where(
            Subscription.team_id == setting.team_id,
            Subscription.channel_id == setting.channel_id,
            Subscription.active.is_(True),
        )
    )
    sessions = [
        DigestSession(session_id=sid, display_name=_display(snapshot), status=status)
        for sid, snapshot, status in watched.tuples()
    ]
    rows = await db.execute(
        select(OutboxMessage.session_id, OutboxMessage.kind, OutboxMessage.payload)
        .where(
            OutboxMessage.channel_id == setting.channel_id,
            OutboxMessage.kind.in_([Kind.TRANSITION, Kind.ROOT]),
            OutboxMessage.created_at >= now - timedelta(hours=24),
        )
        .order_by(OutboxMessage.id)
    )
    changes = []
    for sid, kind, payload in rows.tuples():
        change = read_payload(kind, payload)
        assert isinstance(change, TransitionPayload | RootPayload)
        changes.append(
            DigestChange(
                name=_display(change.session) or str(sid),
                old_status=change.old_status,
                new_status=change.new_status,
            )
        )
    return DigestPayload(day=day, sessions=sessions, changes=changes)


def _display(snapshot: object) -> str | None:
    name = snapshot.get("display_name") if isinstance(snapshot, dict) else None
    return name if isinstance(name, str) else None


async def prune_outbox(rt: Runtime) -> int:
    """Drop finished outbox rows past their retention; pending rows are never dropped.

    Remembered alerts go only once the error watch has not listed their error
    for as long: a session still in ERROR keeps its alert remembered."""
    cutoff = utcnow() - timedelta(days=rt.settings.outbox_retention_days)
    async with rt.sessionmaker() as db, db.begin():
        result = await db.execute(
            delete(OutboxMessage)
            .where(OutboxMessage.state != State.PENDING, OutboxMessage.created_at < cutoff)
            .execution_options(synchronize_session=False)
        )
        await db.execute(
            delete(AlertSent)
            .where(AlertSent.last_seen_at < cutoff)
            .execution_options(synchronize_session=False)
        )
    return int(getattr(result, "rowcount", 0) or 0)
