"""The org-wide error watch (WATCH_ALL_ERRORS): on-call hears of any session
that enters ERROR, subscribed or not, once per error. One replica at a time
runs it: a `jobs` row is the lock, claimed with SKIP LOCKED and a lease.

One listed session the bot cannot handle (text the database refuses, a value no
code expected) never holds back the others: what is written is split until that
session stands alone, and it is set aside for this run with one operator alert;
every other error is paged."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.outbox.alerts_sent import remember_alerts, seen_again, unalerted
from bot.outbox.contract.rows import bounded_key, oncall_key, oncall_row, operator_row
from bot.outbox.queue import insert_outbox
from bot.runtime import Runtime
from bot.store.errors import database_gone
from bot.store.job_locks import exclusive_job, set_baseline
from bot.store.queries.subscriptions import first_threads
from bot.store.tables import database_now
from bot.store.write_apart import write_apart
from bot.together.list_pass import Lister, ListPass
from bot.training.sessions import TrainingSession
from bot.training.status import STATUS_PREFIX, Status
from bot.training.time_bounds import utc_or_none

log = logging.getLogger(__name__)

JOB = "watch_all_errors"
# A watch idle longer than this was switched off, not briefly down: start afresh.
WATCH_RESTART_AFTER = timedelta(hours=1)
# Together's timestamps come from Together's clock, whole seconds at times; the baseline
# from the database's. An error stamped this little before the baseline is still news:
# whatever the baseline run itself listed is remembered as history, so this re-pages nothing.
BASELINE_CLOCK_SLACK = timedelta(seconds=60)
ERROR_STATUS = STATUS_PREFIX + Status.ERROR.value


async def page_new_errors(rt: Runtime, *, lister: Lister | None = None) -> int:
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
    async with exclusive_job(
        rt.sessionmaker, JOB, owner=rt.owner, lease_seconds=settings.lease_seconds
    ) as run:
        if run is None:
            return 0
        # Every time the watch keeps is the database's: replicas' clocks may disagree.
        idle = run.now - run.last_run_at if run.last_run_at else None
        starting = run.baseline_at is None or (idle is not None and idle > WATCH_RESTART_AFTER)
        baseline = run.baseline_at or run.now
        if starting:
            # Errors from before the watch began (or was switched back on) are history.
            baseline = run.now
            async with rt.sessionmaker() as db, db.begin():
                await set_baseline(db, JOB, owner=rt.owner, at=baseline)
        listed = await lister.get(
            [ERROR_STATUS],
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
        memos = _memos(listed, starting=starting, baseline=baseline)
        paged, set_aside = await _write_apart(rt, memos, starting=starting)
        if set_aside:
            await _report_set_aside(rt, set_aside)
    return paged


def _memos(listed: ListPass, *, starting: bool, baseline: datetime) -> list[_Memo]:
    """What to write of each listed error; a session that cannot even be read
    or keyed is set aside here (logged) and the rest go on."""
    memos = []
    for session_id in listed.ids_in([ERROR_STATUS]):
        try:
            session = listed.session(session_id)
            news = not starting and _is_news(session, baseline)
            memos.append(_Memo.of(session, news=news))
        except Exception:
            log.exception(
                "org-wide error watch set aside a listed session it could not read",
                extra={"session_id": str(session_id)[:128]},
            )
    return memos


def _is_news(session: TrainingSession, baseline: datetime) -> bool:
    """The error happened since the watch began, by Together's stamp: when it
    occurred, else when the session last changed (a time out of range is none)."""
    occurred = session.error.occurred_at if session.error else None
    when = utc_or_none(occurred) or utc_or_none(session.updated_at)
    return when is not None and when >= baseline - BASELINE_CLOCK_SLACK


async def _write_apart(
    rt: Runtime, memos: list[_Memo], *, starting: bool
) -> tuple[int, list[_Memo]]:
    """Write `memos` so that a session at fault is set aside alone (`write_apart`);
    how many were paged, and the set-aside."""
    paged = 0

    async def write(chunk: Sequence[_Memo]) -> None:
        nonlocal paged
        paged += await _write(rt, chunk, starting=starting)

    failures = await write_apart(
        memos,
        write,
        fatal=database_gone,
        split_warning="org-wide error watch could not write this run (%s); writing each apart",
    )
    for memo, exc in failures:
        log.error(
            "org-wide error watch set aside a session it could not write (%s)",
            type(exc).__name__,
            extra={"session_id": memo.session_id[:128]},
        )
    return paged, [memo for memo, _ in failures]


async def _write(rt: Runtime, memos: Sequence[_Memo], *, starting: bool) -> int:
    """Remember and page `memos` in one transaction; how many were paged."""
    settings = rt.settings
    channel = settings.oncall_channel or ""
    async with rt.sessionmaker() as db, db.begin():
        now = await database_now(db)
        if starting:
            # Errors from before the watch began (or was switched back on) are history.
            await remember_alerts(db, memos, now=now, alerted=False)
        fresh = [
            memo.session for memo in await unalerted(db, [m for m in memos if m.news], now=now)
        ]
        if fresh:
            threads = await first_threads(db, [s.id for s in fresh])
            rows = [
                oncall_row(
                    channel,
                    s,
                    seq=None,
                    thread_channel=threads[s.id].channel_id if s.id in threads else None,
                    thread_ts=threads[s.id].root_ts if s.id in threads else None,
                )
                for s in fresh
            ]
            await insert_outbox(db, rows)
        if memos:  # still listed in ERROR: the memory of these alerts still matters
            await seen_again(db, [m.dedupe_key for m in memos], now=now)
    return len(fresh)


async def _report_set_aside(rt: Runtime, memos: list[_Memo]) -> None:
    """One operator alert per set-aside error (its key dedupes it across runs)."""
    channel = rt.settings.oncall_channel or ""
    for memo in memos:
        shown = memo.session_id.replace("\x00", "")[:128]
        row = operator_row(
            channel,
            bounded_key("watch-set-aside", memo.dedupe_key),
            "An error could not be paged",
            f"Session {shown} is in ERROR, but the org-wide error watch could not store "
            "its alert; it is set aside while it stays so. Look at it in Together.",
        )
        try:
            async with rt.sessionmaker() as db, db.begin():
                await insert_outbox(db, [row])
        except Exception as exc:
            if database_gone(exc):
                raise
            log.exception("could not queue the operator alert for a set-aside session")


@dataclass(frozen=True)
class _Memo:
    """What `alerts_sent` keeps of an error (and the session, for the caller)."""

    dedupe_key: str
    session_id: str
    session: TrainingSession
    news: bool = False  # happened since the watch began: page it unless paged before

    @classmethod
    def of(cls, session: TrainingSession, *, news: bool = False) -> _Memo:
        return cls(oncall_key(session, None), session.id, session, news)
