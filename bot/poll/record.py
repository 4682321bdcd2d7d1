"""Writing what a batch's polls were judged to mean: the watch rows, the outbox
rows their events owe, the subscriptions of sessions that ended.

The new state and the outbox rows for it are written in one transaction, and
outbox rows are keyed by the session's transition sequence number, so a cycle
that is repeated after a crash writes nothing twice. Results are written only
for sessions whose lease this replica still holds.

Statements per write do not depend on the number of subscriptions: one re-read
of the watch rows, one subscription read, one read of the people listening (the
App Home switch), one outbox insert, one state update
per column set, a few incident statements.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from bot.alerts.budgets import judge_budgets
from bot.alerts.metric_rules import judge_rules, poll_readings
from bot.alerts.resource_reader import Read
from bot.alerts.stall import StallSettings
from bot.outbox.alerts_sent import unalerted
from bot.outbox.creator_dm import creator_dms
from bot.outbox.queue import insert_outbox
from bot.poll.audience import SessionEvent, Subscriber, notifications
from bot.poll.chart_rows import chart_rows
from bot.poll.fetch import Fetched
from bot.poll.incidents import track_incidents
from bot.poll.judge import judge
from bot.poll.personal import personal_rows
from bot.settings.model import Settings
from bot.store.queries.audience import end_with_sessions, listening_subscriptions
from bot.store.queries.personal_alerts import listeners
from bot.store.queries.progress_points import record_steps
from bot.store.queries.watch_state import held_states, snapshots, write_states
from bot.store.session import Db
from bot.store.tables import database_now
from bot.training.snapshots import SessionSnapshot

log = logging.getLogger(__name__)


async def record_outcomes(
    db: Db,
    outcomes: dict[str, Fetched],
    *,
    owner: str,
    settings: Settings,
    polled_at: datetime | None = None,
    interval: float | None = None,
    incidents: bool = True,
    reads: Mapping[str, Read] | None = None,
) -> tuple[dict[str, int], int]:
    """Write new state and outbox rows for sessions this replica still leases.

    `reads` are the model resources the spend watch read this cycle, by session:
    kept in the progress column and, when what the card shows changed, redrawn.

    The fence: only sessions still leased to `owner` whose lease has not run out
    by the database's clock are written (and locked until the commit, so no
    claim can take them meanwhile); the rest belong to whoever took them over.

    The next poll is one interval after the cycle started (`polled_at`), not after
    it ended, so a session is polled every interval rather than every interval
    plus a cycle plus a scheduler tick.

    Returns how many sessions changed to each status, and the outbox rows written."""
    interval = interval or settings.poll_interval_seconds
    rows = await held_states(db, list(outcomes), owner=owner)
    owned = {r.session_id: r for r in rows}
    if len(owned) < len(outcomes):
        log.warning(
            "lost the lease on %d sessions; not writing their results",
            len(outcomes) - len(owned),
        )
    if rows:
        now = rows[0].db_now
    elif incidents:
        now = await database_now(db)
    else:
        return {}, 0
    judged = judge(
        owned,
        outcomes,
        now=now,
        next_poll=(polled_at or now) + timedelta(seconds=interval),
        confirm=timedelta(seconds=settings.not_found_confirm_seconds),
        interval=interval,
        stall_after=stall_settings(settings).stall_after,
        reads=reads,
    )

    outbox_rows = await _write_events(db, judged.events, settings=settings, now=now)
    if judged.updates:
        await write_states(db, judged.updates, owner=owner)
        await record_steps(db, moved_steps(owned, judged.updates), now=now)
        # the channels' rules on steps/min and their budgets, judged on this poll
        outbox_rows += await judge_rules(
            db, poll_readings(judged.updates), now=now, oncall_channel=settings.oncall_channel
        )
        outbox_rows += await judge_budgets(
            db,
            judged.updates,
            now=now,
            zone=settings.default_timezone,
            oncall_channel=settings.oncall_channel,
        )
    ended = judged.ended()
    if ended:
        await end_with_sessions(db, ended, now=now)
    if incidents:
        await track_incidents(db, outcomes.values(), settings=settings, now=now)
    return judged.to_status(), outbox_rows


def moved_steps(owned: Mapping[str, Any], updates: Mapping[str, dict[str, Any]]) -> dict[str, int]:
    """The sessions whose step this poll saw move (or saw first), with the new step:
    the points of their progress charts."""
    moved: dict[str, int] = {}
    for session_id, values in updates.items():
        if "progress" not in values or session_id not in owned:
            continue
        step = values["progress"].step
        old = owned[session_id].progress
        if step is not None and step != (old.step if old is not None else None):
            moved[session_id] = step
    return moved


async def _write_events(
    db: Db,
    events: dict[str, list[SessionEvent]],
    *,
    settings: Settings,
    now: datetime,
) -> int:
    """Write the rows the events owe (`audience.notifications` decides which): one
    read of the subscriptions, one of the people listening, one of the alerts
    already sent, one insert."""
    if not events:
        return 0
    found = await listening_subscriptions(db, list(events))
    watchers = [
        Subscriber(
            id=sub.id,
            session_id=sub.session_id,
            channel_id=sub.channel_id,
            root_ts=sub.root_ts,
            filters=frozenset(f for f in sub.filters.split(",") if f),
            muted_until=sub.muted_until,
            stall_after_minutes=sub.stall_after_minutes,
            target_step=sub.target_step,
            budget=sub.amount,
        )
        for sub in found
    ]
    stored = await _snapshots_for_gone(db, events)
    owed = notifications(
        events,
        watchers,
        now=now,
        oncall_channel=settings.oncall_channel,
        stored_snapshots=stored,
        stall=stall_settings(settings),
    )
    charts = chart_rows(
        owed.rows,
        final_chart={sub.id for sub in found if sub.chart_on_end},
        stall_minutes={sub.id: sub.stall_after_minutes for sub in found},
    )
    # the people whose App Home switch took these sessions: their DMs
    personal = personal_rows(
        events,
        await listeners(db, list(events)),
        now=now,
        stored_snapshots=stored,
        stall=stall_settings(settings),
    )
    rows = owed.rows + charts + personal + await unalerted(db, owed.alerts, now=now)
    rows += await creator_dms(db, owed.rows, user_map=settings.created_by_user_map)
    await insert_outbox(db, rows)
    return len(rows)


def stall_settings(settings: Settings) -> StallSettings:
    """STALL_AFTER_MINUTES, CREATING_ALERT_AFTER_MINUTES (0: off) and ONCALL_ON_STALL."""
    minutes = settings.stall_after_minutes
    creating = settings.creating_alert_after_minutes
    return StallSettings(
        stall_after=timedelta(minutes=minutes) if minutes > 0 else None,
        creating_after=timedelta(minutes=creating) if creating > 0 else None,
        oncall_channel=settings.oncall_channel,
        page_on_stall=settings.oncall_on_stall,
    )


async def _snapshots_for_gone(
    db: Db, events: dict[str, list[SessionEvent]]
) -> dict[str, SessionSnapshot | None]:
    """The stored snapshots of sessions Together no longer knows: their last word."""
    missing = [sid for sid, found in events.items() if any(e.session is None for e in found)]
    return await snapshots(db, missing) if missing else {}
