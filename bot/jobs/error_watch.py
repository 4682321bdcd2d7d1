"""The org-wide error watch (WATCH_ALL_ERRORS): on-call hears of any session
that enters ERROR, subscribed or not, once per error. One replica at a time
runs it: a `jobs` row is the lock, claimed with SKIP LOCKED and a lease."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import select, update

from bot.outbox.contract.rows import oncall_key, oncall_row
from bot.outbox.queue import insert_outbox, remember_alerts, unalerted
from bot.runtime import Runtime
from bot.store.job_locks import claim_job, release_job
from bot.store.tables import AlertSent, Subscription, utcnow
from bot.together.list_pass import Lister
from bot.training.sessions import TrainingSession
from bot.training.status import STATUS_PREFIX, Status

log = logging.getLogger(__name__)
# A watch idle longer than this was switched off, not briefly down: start afresh.
WATCH_RESTART_AFTER = timedelta(hours=1)
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
