"""The poll cycle: claim due sessions, fetch each once, diff, write the outbox.

Replicas share the work through the database: due sessions are claimed with
`FOR UPDATE SKIP LOCKED` and a lease, so no two replicas poll the same session
and a crashed replica's sessions come back once its lease runs out. Leases are
judged by the database's clock; a claim is sized to what can be fetched in half
a lease at `TOGETHER_MAX_RPS`, the leases are renewed while the fetch goes on,
and results are written only for sessions whose lease this replica still holds.
The new state and the outbox rows for it are written in one transaction, and
outbox rows are keyed by the session's transition sequence number, so a cycle
that is repeated after a crash writes nothing twice.

One session whose result cannot be stored (odd API text the database refuses)
never holds back the others: the batch is split until that session stands
alone; after MAX_WRITE_FAILURES polls in a row it is set aside with one
operator alert.

Each cycle learns the due sessions' states the cheaper way (`bot.together.poll_plan`):
one GET each, or the list pages of the live statuses (shared through
`bot.together.list_pass.Lister`) plus one GET for each due session not listed, since only
a direct GET may say a session ended or is gone. A list pass cut short by a
failed page says nothing of the sessions it did not reach: they count as that
failure (backed off, never "ended"). The interval in use is the shortest that
keeps a round of polls within `TOGETHER_REQUESTS_PER_MINUTE`.

A session whose row comes back exactly as the last poll stored it (its
fingerprint, `bot.training.sessions.RawSession`) is not parsed, trimmed or compared
again: only what moves with time (its progress, its next poll) is written.

Statements per cycle do not depend on the number of subscriptions: one claim,
one lease update, a count of the watch, one re-read, one subscription read, one
outbox insert, one state update, a few incident statements.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import Table, and_, bindparam, func, or_, select, update
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.alerts.spend import Read, ResourceReader, watch_key
from bot.alerts.spend import stored as stored_spend
from bot.alerts.stall import ProgressCheck, StallSettings
from bot.alerts.stall import check as check_progress
from bot.config import Settings
from bot.faults import crash_point
from bot.outbox.contract.rows import bounded_key, operator_row
from bot.outbox.queue import insert_outbox, unalerted
from bot.poll.audience import SessionEvent, Watcher, notifications
from bot.poll.incidents import track_incidents
from bot.store.tables import Subscription, WatchedSession, db_now
from bot.together.budget import POLL, SIDE_KINDS, charged_to
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.together.list_pass import Lister
from bot.together.poll_plan import (
    ERROR_STATUSES,
    LIVE_STATUSES,
    Plan,
    Seen,
    budget_interval,
    choose,
    max_pages,
    round_cost,
    seen_after,
)
from bot.training.sessions import RawSession, TrainingSession
from bot.training.snapshots import watch_state
from bot.training.status import Status, short_status
from bot.training.transitions import checkpoint_news, detect, gone

log = logging.getLogger(__name__)

# The longest a failing session waits for its next poll.
MAX_POLL_BACKOFF_SECONDS = 900.0
# A session due this close to a tick is polled at that tick, not one tick later:
# ticks jitter by milliseconds, and a miss costs a whole tick (up to 5 s).
MAX_DUE_SLACK_SECONDS = 0.5
# Polls in a row whose result could not be stored before a session is set aside.
MAX_WRITE_FAILURES = 5
# A list pass that POLL_PLAN=list forces is not bounded by what GETs would cost.
MAX_LIST_PAGES = 1000
# Sessions written (and, by GET, fetched) at a time: what a cycle holds at once.
RECORD_CHUNK = 500
# List pages handed to the writer and not yet written (held as text, about 150 KB
# each): a slow write holds the pass back only once this many wait.
PAGES_AHEAD = 3
# The side requests of a round are averaged over at least this long (`side_window`).
SIDE_WINDOW = 300.0


@dataclass
class CycleResult:
    claimed: int = 0
    fetched: int = 0
    failed: int = 0
    transitions: int = 0
    outbox_rows: int = 0
    to_status: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    plan: Plan = Plan.GET
    list_pages: int = 0
    gets: int = 0
    interval: float = 0.0  # the interval the polled sessions were given
    watched: int = 0  # sessions watched in all (a round)
    from_error_pages: int = 0  # ended sessions learnt from the error watch's pages, not a GET


@dataclass
class Planner:
    """This process's view of the project (what the last list pass saw) and the
    poll interval in use; kept across cycles, one per process."""

    seen: Seen | None = None
    interval: float | None = None
    clock: Callable[[], float] = time.monotonic
    # The poller's own requests beyond its plan in a round (the spend watch's
    # resource reads and prices), as the last cycle spent them.
    side: float = 0.0
    # What the other consumers spent in the last window, per minute, when the
    # interval was last sized (the other replicas' `remote` included).
    others: float = 0.0
    # What the other live replicas' consumers but their pollers spent a minute, as
    # they last reported it (`bot.jobs.spend_exchange`): the budget is the deployment's.
    remote: float = 0.0

    def interval_for(
        self, watched: int, plan: Plan, settings: Settings, *, others: float = 0.0
    ) -> float:
        """The shortest interval at which a round over `watched` sessions fits what
        the other consumers (`others` requests a minute here, `remote` on the other
        replicas) left of the budget."""
        self.others = others + self.remote
        self.interval = budget_interval(
            round_cost(watched, self.seen, plan) + self.side,
            requests_per_minute=settings.together_requests_per_minute,
            others_per_minute=self.others,
            min_seconds=settings.poll_min_interval_seconds,
            max_seconds=settings.poll_interval_seconds,
        )
        return self.interval

    # (when, side requests, sessions claimed) of the cycles in the last `side_window`
    cycles: deque[tuple[float, int, int]] = field(default_factory=deque)
    side_window: float = SIDE_WINDOW

    def note_side(self, spent: int, *, claimed: int, watched: int) -> None:
        """The side requests a round costs, averaged over the cycles of the last
        `side_window` seconds: the spend watch reads a resource once per
        SPEND_REFRESH_SECONDS, so one cycle reads many and the next ones none, and
        sizing from the last cycle alone would swing the interval with them. A tick
        that claimed and spent nothing is no cycle (most ticks are: the poll job
        ticks every few seconds and sessions fall due once an interval); counted,
        it made the average nothing and the side cost never stretched the interval."""
        if not claimed and not spent:
            return
        now = self.clock()
        self.cycles.append((now, spent, claimed))
        while self.cycles and now - self.cycles[0][0] > self.side_window:
            self.cycles.popleft()
        polled = sum(c for _, _, c in self.cycles)
        if polled:
            self.side = sum(s for _, s, _ in self.cycles) * max(watched, claimed) / polled


# What one poll learnt of a session: its state (as sent, or parsed), or why
# Together did not say.
Fetched = TrainingSession | RawSession | TogetherError


async def poll_cycle(
    *,
    sessionmaker: async_sessionmaker[AsyncSession],
    together: TogetherClient,
    settings: Settings,
    owner: str,
    planner: Planner | None = None,
    lister: Lister | None = None,
    resources: ResourceReader | None = None,
) -> CycleResult:
    """Poll every due session once; loops while a claim comes back full (the
    batches of one cycle share one list pass, and `resources`, the spend watch,
    reads each model resource once). Its Together requests are charged to the
    poller in the request budget."""
    with charged_to(POLL):
        return await _poll_cycle(
            sessionmaker=sessionmaker,
            together=together,
            settings=settings,
            owner=owner,
            planner=planner or Planner(),
            lister=lister,
            resources=resources,
        )


async def _poll_cycle(
    *,
    sessionmaker: async_sessionmaker[AsyncSession],
    together: TogetherClient,
    settings: Settings,
    owner: str,
    planner: Planner,
    lister: Lister | None,
    resources: ResourceReader | None,
) -> CycleResult:
    lister = lister or Lister(together, clock=planner.clock)
    if resources is not None:
        resources.begin_cycle()
    total = CycleResult()
    t0, started = time.monotonic(), lister.clock()
    pages_before = lister.pages_fetched(LIVE_STATUSES)
    side_before = together.ledger.total(consumer=POLL, kinds=SIDE_KINDS)
    while True:
        result = await _poll_batch(
            sessionmaker=sessionmaker,
            together=together,
            settings=settings,
            owner=owner,
            planner=planner,
            lister=lister,
            resources=resources,
            cycle_started=started,
        )
        if result.claimed:
            total.plan, total.interval, total.watched = result.plan, result.interval, result.watched
        for name in (
            "claimed",
            "fetched",
            "failed",
            "transitions",
            "outbox_rows",
            "gets",
            "from_error_pages",
        ):
            setattr(total, name, getattr(total, name) + getattr(result, name))
        for kind, n in result.errors.items():
            total.errors[kind] = total.errors.get(kind, 0) + n
        for status, n in result.to_status.items():
            total.to_status[status] = total.to_status.get(status, 0) + n
        if result.claimed < claim_size(settings):
            break
    lister.forget(LIVE_STATUSES)  # a later cycle lists afresh: hold no sessions meanwhile
    side = together.ledger.total(consumer=POLL, kinds=SIDE_KINDS) - side_before
    planner.note_side(side, claimed=total.claimed, watched=total.watched)
    total.list_pages = lister.pages_fetched(LIVE_STATUSES) - pages_before
    total.seconds = time.monotonic() - t0
    return total


async def _poll_batch(
    *,
    sessionmaker: async_sessionmaker[AsyncSession],
    together: TogetherClient,
    settings: Settings,
    owner: str,
    planner: Planner,
    lister: Lister,
    resources: ResourceReader | None,
    cycle_started: float,
) -> CycleResult:
    result = CycleResult()
    ids, polled_at, watched = await claim_due_sessions(sessionmaker, owner=owner, settings=settings)
    result.claimed, result.watched = len(ids), watched
    if not ids:
        return result
    crash_point("poll_after_claim", settings.fault_crash_at)
    forced = None if settings.poll_plan == "auto" else Plan(settings.poll_plan)
    clock = planner.clock()
    result.plan = choose(len(ids), planner.seen, now=clock, forced=forced)
    if (
        forced is not Plan.GET
        and len(ids) < claim_size(settings)
        and Plan.LIST in (result.plan, choose(watched, planner.seen, now=clock))
    ):
        # A list pass shows every live session: the sessions due before the next
        # cycle come along for no more requests, and the round keeps one rhythm (one
        # pass an interval, not one for each tick at which some fall due: sessions
        # subscribed at different times would each make their own).
        more, _, _ = await claim_due_sessions(
            sessionmaker,
            owner=owner,
            settings=settings,
            ahead=planner.interval or settings.poll_interval_seconds,
            limit=claim_size(settings) - len(ids),
        )
        worth = choose(len(ids) + len(more), planner.seen, now=clock, forced=forced)
        if more and worth is Plan.LIST:
            ids += more
            result.plan = Plan.LIST
            result.claimed = len(ids)
        elif more:  # not worth a pass after all (another replica holds the rest)
            await _release(sessionmaker, more, owner=owner)

    if resources is not None:
        resources.expect(len(ids))  # handed over a page at a time: one pass for them all
    result.interval = planner.interval_for(
        watched, result.plan, settings, others=together.ledger.others_per_minute()
    )

    # Sit out a short 429 pause; a long one backs the sessions off instead, so the
    # cycle ends well inside its leases. A slow Together is covered by renewing them.
    renewing = asyncio.create_task(
        _keep_leases(sessionmaker, ids, owner=owner, lease_seconds=settings.lease_seconds)
    )
    reach = _Reach()

    async def write(part: dict[str, Fetched]) -> None:
        """Store one bounded part of the batch in its own transaction."""
        reach.add(part.values())
        for outcome in part.values():
            if isinstance(outcome, TogetherError):
                result.failed += 1
                result.errors[outcome.kind] = result.errors.get(outcome.kind, 0) + 1
            else:
                result.fetched += 1
        # the spend watch: each model resource once per cycle; a failed read is left out
        reads = None
        if resources is not None:
            reads = await resources.read(
                s.head if isinstance(s, RawSession) else s
                for s in part.values()
                if not isinstance(s, TogetherError)
            )
        to_status, rows = await _store(
            sessionmaker,
            part,
            owner=owner,
            settings=settings,
            polled_at=polled_at,
            interval=poll_gap(result.interval, settings),
            reads=reads,
        )
        for status, n in to_status.items():
            result.to_status[status] = result.to_status.get(status, 0) + n
        result.outbox_rows += rows

    try:
        await learn(
            together,
            lister,
            planner,
            ids,
            plan=result.plan,
            pages=MAX_LIST_PAGES if forced is Plan.LIST else max_pages(len(ids)),
            since=cycle_started,
            settings=settings,
            counts=result,
            write=write,
        )
    finally:
        renewing.cancel()
    # Incidents are judged once, over the whole batch, as when it was one write.
    async with sessionmaker() as db, db.begin():
        now = (await db.execute(select(db_now()))).scalar_one()
        await track_incidents(db, reach.results(), settings=settings, now=now)
    result.transitions = sum(result.to_status.values())
    crash_point("poll_after_state_write", settings.fault_crash_at)
    return result


class _Reach:
    """What incidents need of a batch's results, without holding them: every
    failure, and whether anything came back at all."""

    def __init__(self) -> None:
        self._errors: list[TogetherError] = []
        self._answered: TrainingSession | RawSession | None = None

    def add(self, results: Iterable[Fetched]) -> None:
        for r in results:
            if isinstance(r, TogetherError):
                self._errors.append(r)
            elif self._answered is None:
                self._answered = r

    def results(self) -> list[Fetched]:
        answered: list[Fetched] = [self._answered] if self._answered is not None else []
        return [*self._errors, *answered]


async def _store(
    sessionmaker: async_sessionmaker[AsyncSession],
    part: dict[str, Fetched],
    *,
    owner: str,
    settings: Settings,
    polled_at: datetime | None,
    interval: float,
    reads: Mapping[str, Read] | None = None,
) -> tuple[dict[str, int], int]:
    """Write `part` in one transaction. If the database refuses it, each half in
    its own transaction, halved again where it fails, until the sessions that
    cannot be stored stand alone (one bad session among n costs about 2·log2(n)
    transactions). Those are counted toward being set aside, unless none at all
    could be stored: then the fault is not in any one session, and nothing is
    counted."""
    refused: dict[str, DBAPIError] = {}
    to_status: dict[str, int] = defaultdict(int)
    totals = [0, 0]  # outbox rows, sessions stored

    async def store(chunk: dict[str, Fetched]) -> None:
        try:
            async with sessionmaker() as db, db.begin():
                statuses, written = await record_outcomes(
                    db,
                    chunk,
                    owner=owner,
                    settings=settings,
                    polled_at=polled_at,
                    interval=interval,
                    incidents=False,
                    reads=reads,
                )
        except DBAPIError as exc:
            if not _refused_data(exc):
                raise
            if len(chunk) == 1:
                refused.update(dict.fromkeys(chunk, exc))
                return
            if chunk is part:
                log.warning(
                    "could not store this batch's poll results (%s); storing each session apart",
                    type(exc).__name__,
                )
            items = list(chunk.items())
            await store(dict(items[: len(items) // 2]))
            await store(dict(items[len(items) // 2 :]))
            return
        for status, n in statuses.items():
            to_status[status] += n
        totals[0] += written
        totals[1] += len(chunk)

    await store(part)
    if refused and not totals[1] and len(part) > 1:
        raise next(iter(refused.values()))
    for session_id, exc in refused.items():
        await _note_write_failure(sessionmaker, session_id, exc, owner=owner, settings=settings)
    return dict(to_status), totals[0]


def _refused_data(exc: DBAPIError) -> bool:
    """The database refused what was written (not: the database went away)."""
    return not exc.connection_invalidated and not isinstance(exc, OperationalError | InterfaceError)


async def _note_write_failure(
    sessionmaker: async_sessionmaker[AsyncSession],
    session_id: str,
    exc: DBAPIError,
    *,
    owner: str,
    settings: Settings,
) -> None:
    """Count a poll whose result could not be stored; back off, and at
    MAX_WRITE_FAILURES set the session aside with one operator alert."""
    reason = type(exc.orig).__name__ if exc.orig is not None else type(exc).__name__
    async with sessionmaker() as db, db.begin():
        row = (
            await db.execute(
                select(
                    WatchedSession.write_failures,
                    WatchedSession.transition_seq,
                    db_now().label("db_now"),
                )
                .where(
                    WatchedSession.session_id == session_id,
                    WatchedSession.lease_owner == owner,
                )
                .with_for_update(of=WatchedSession)
            )
        ).first()
        if row is None:
            return
        failures = row.write_failures + 1
        delay = _backoff(failures, settings.poll_interval_seconds, None)
        values: dict[str, Any] = {
            "write_failures": failures,
            "last_failure": f"could not store a poll result ({reason})",
            "next_poll_at": row.db_now + timedelta(seconds=delay),
            "lease_owner": None,
            "lease_until": None,
        }
        log.warning(
            "could not store a session's poll result (%d in a row): %s",
            failures,
            reason,
            extra={"session_id": session_id},
        )
        if failures >= MAX_WRITE_FAILURES:
            values.update(
                active=False,
                last_failure=f"set aside: {failures} poll results in a row could not be "
                f"stored ({reason})",
            )
            log.error(
                "session set aside: its poll results cannot be stored",
                extra={"session_id": session_id},
            )
            if settings.oncall_channel:
                await insert_outbox(
                    db,
                    [
                        operator_row(
                            settings.oncall_channel,
                            bounded_key("set-aside", session_id, str(row.transition_seq)),
                            "A watched session was set aside",
                            f"{failures} polls in a row of session {session_id[:128]} could "
                            f"not be stored ({reason}); it is no longer polled and its "
                            "subscriptions hear nothing more. Unsubscribe and subscribe "
                            "again to retry.",
                        )
                    ],
                )
        await db.execute(
            update(WatchedSession)
            .where(WatchedSession.session_id == session_id)
            .values(**values)
            .execution_options(synchronize_session=False)
        )


def side_window(settings: Settings) -> float:
    """How long the poller's side cost is averaged over: at least two refreshes of
    the spend watch's reads (the fewer passes a window holds, the more one pass
    coming in or dropping out swings the interval)."""
    return max(SIDE_WINDOW, 2 * settings.spend_refresh_seconds)


def due_slack(settings: Settings) -> float:
    """How long before it is due a session may be claimed (see MAX_DUE_SLACK_SECONDS)."""
    return min(MAX_DUE_SLACK_SECONDS, settings.poll_interval_seconds / 10)


def poll_gap(interval: float, settings: Settings) -> float:
    """How long after this poll a session is next due, for the `interval` in use.

    A session is claimed up to `due_slack` before it is due. While the request
    budget sets the interval, that much is added, so no session is polled more
    often than the budget allows. At the fixed ends (POLL_MIN_INTERVAL_SECONDS,
    POLL_INTERVAL_SECONDS) nothing is: there the slack is what lets the tick at
    the interval's end claim it (with the slack added, a tick landing on the
    interval misses it by its jitter half the time and a change waits a whole
    tick more; measured: 500 changes told in 66 s against 62.7 s)."""
    budget_bound = settings.poll_min_interval_seconds < interval < settings.poll_interval_seconds
    return interval + due_slack(settings) if budget_bound else interval


def claim_size(settings: Settings) -> int:
    """Sessions per claim: what `TOGETHER_MAX_RPS` lets us fetch in half a lease."""
    fits = int(settings.together_max_rps * settings.lease_seconds / 2)
    return max(1, min(settings.poll_batch_size, fits))


async def claim_due_sessions(
    sessionmaker: async_sessionmaker[AsyncSession],
    *,
    owner: str,
    settings: Settings,
    ahead: float = 0.0,
    limit: int | None = None,
) -> tuple[list[str], datetime | None, int]:
    """Lease due sessions; return their ids, the database's time of the claim, and
    how many sessions are watched in all (what a round of polls costs; 0 when
    `ahead`). With `ahead`, the sessions due within that many seconds instead,
    those not failing (a failing one keeps its back-off and Retry-After)."""
    due = [WatchedSession.next_poll_at <= db_now(due_slack(settings) + ahead)]
    if ahead:
        due.append(WatchedSession.consecutive_failures == 0)
    async with sessionmaker() as db, db.begin():
        rows = (
            await db.execute(
                select(WatchedSession.session_id, db_now().label("db_now"))
                .where(
                    WatchedSession.active.is_(True),
                    *due,
                    or_(
                        WatchedSession.lease_until.is_(None),
                        WatchedSession.lease_until < db_now(),
                    ),
                )
                .order_by(WatchedSession.next_poll_at)
                .limit(limit or claim_size(settings))
                .with_for_update(skip_locked=True, of=WatchedSession)
            )
        ).all()
        ids = [r.session_id for r in rows]
        watched = 0
        if ids:
            await db.execute(
                update(WatchedSession)
                .where(WatchedSession.session_id.in_(ids))
                .values(lease_owner=owner, lease_until=db_now(settings.lease_seconds))
                .execution_options(synchronize_session=False)
            )
        if ids and not ahead:
            watched = (
                await db.execute(
                    select(func.count())
                    .select_from(WatchedSession)
                    .where(WatchedSession.active.is_(True))
                )
            ).scalar_one()
    return ids, (rows[0].db_now if rows else None), watched


async def _release(
    sessionmaker: async_sessionmaker[AsyncSession], ids: list[str], *, owner: str
) -> None:
    """Hand back the leases of sessions claimed but not polled after all."""
    async with sessionmaker() as db, db.begin():
        await db.execute(
            update(WatchedSession)
            .where(WatchedSession.session_id.in_(ids), WatchedSession.lease_owner == owner)
            .values(lease_owner=None, lease_until=None)
            .execution_options(synchronize_session=False)
        )


async def _keep_leases(
    sessionmaker: async_sessionmaker[AsyncSession],
    ids: list[str],
    *,
    owner: str,
    lease_seconds: float,
) -> None:
    """Renew a batch's leases every third of a lease while it is fetched; only those
    this replica still holds (by the database's clock)."""
    while True:
        await asyncio.sleep(lease_seconds / 3)
        try:
            async with sessionmaker() as db, db.begin():
                await db.execute(
                    update(WatchedSession)
                    .where(
                        WatchedSession.session_id.in_(ids),
                        WatchedSession.lease_owner == owner,
                        WatchedSession.lease_until > db_now(),
                    )
                    .values(lease_until=db_now(lease_seconds))
                    .execution_options(synchronize_session=False)
                )
        except Exception:  # the write fence still holds; the next renewal may work
            log.warning("could not renew poll leases", exc_info=True)


async def learn(
    together: TogetherClient,
    lister: Lister,
    planner: Planner,
    ids: list[str],
    *,
    plan: Plan,
    pages: int,
    since: float,
    settings: Settings,
    counts: CycleResult,
    write: Callable[[dict[str, Fetched]], Awaitable[None]],
) -> None:
    """Learn the state of each of `ids` by `plan` and hand it to `write` a bounded
    part at a time, so a cycle never holds thousands of sessions at once: with the
    list plan, each page's due sessions while the next page loads; GETs
    `RECORD_CHUNK` at a time, the next part fetched while one is written. The list
    plan also updates what `planner` has seen of the project."""

    async def get(some: list[str]) -> dict[str, Fetched]:
        counts.gets += len(some)
        return await fetch_all(
            together,
            some,
            concurrency=settings.poll_concurrency,
            max_wait=settings.lease_seconds / 4,
        )

    async def get_and_write(some: list[str]) -> None:
        parts = [some[i : i + RECORD_CHUNK] for i in range(0, len(some), RECORD_CHUNK)]
        if not parts:
            return
        fetching = asyncio.create_task(get(parts[0]))
        for k in range(len(parts)):
            fetched = await fetching
            if k + 1 < len(parts):
                fetching = asyncio.create_task(get(parts[k + 1]))
            await write(fetched)

    if plan is Plan.GET:
        await get_and_write(ids)
        return
    pending = dict.fromkeys(ids)
    pages_in: asyncio.Queue[list[RawSession] | None] = asyncio.Queue()
    # Pages handed over and not yet written: the pass waits for room, so a slow
    # write holds back the next pages instead of parsed pages piling up in memory.
    room = asyncio.Semaphore(PAGES_AHEAD)
    closed = False

    async def on_page(page: list[RawSession]) -> None:
        if not closed:
            await room.acquire()
        if not closed:
            pages_in.put_nowait(page)

    passing = asyncio.create_task(
        lister.get(LIVE_STATUSES, max_pages=pages, since=since, on_page=on_page)
    )
    passing.add_done_callback(lambda _: pages_in.put_nowait(None))
    try:
        while (page := await pages_in.get()) is not None:
            part: dict[str, Fetched] = {s.id: s for s in page if s.id in pending}
            del page
            for sid in part:
                del pending[sid]
            if part:
                await write(part)
            room.release()
    finally:
        # A write failed (or this was cancelled): let the shared pass run on unheld.
        closed = True
        room.release()
        passing.cancel()  # the pass itself is shielded
    listed = passing.result()
    # A pass someone else began (or one already done) streamed nothing to us.
    known = [sid for sid in pending if sid in listed]
    for i in range(0, len(known), RECORD_CHUNK):
        chunk = known[i : i + RECORD_CHUNK]
        for sid in chunk:
            del pending[sid]
        await write({sid: listed.row(sid) for sid in chunk})
    rest = list(pending)
    previous = planner.seen
    planner.seen = seen_after(
        listed=len(listed),
        complete=listed.complete,
        due=len(ids),
        missing=len(rest),
        at=listed.at,
        before=planner.seen,
    )
    if listed.error is not None:
        # The pages not read may hold any of these: not known to have ended, only
        # not learnt this time, like any failed poll.
        for i in range(0, len(rest), RECORD_CHUNK):
            await write(dict.fromkeys(rest[i : i + RECORD_CHUNK], listed.error))
        return
    if rest:
        # Left the live list: ended or vanished. One listed in an ERROR pass another
        # consumer (the org-wide error watch) began since our last look at the live
        # list is in ERROR for good, and that page is its final state; absence from
        # it says nothing, so the rest are asked for.
        since = previous.at if previous is not None else listed.at - settings.poll_interval_seconds
        errored = await lister.held(ERROR_STATUSES, since=since)
        if errored is not None:
            ended = {
                sid: session
                for sid in rest
                if sid in errored and (session := errored.session(sid)).status_enum is Status.ERROR
            }
            if ended:
                counts.from_error_pages += len(ended)
                rest = [sid for sid in rest if sid not in ended]
                await write(dict(ended))
    await get_and_write(rest)  # ended or vanished (or past a pass cut short): only a GET may say


async def fetch_all(
    together: TogetherClient, ids: list[str], *, concurrency: int, max_wait: float | None = None
) -> dict[str, Fetched]:
    """Fetch each session once; one failure never stops the others."""
    semaphore = asyncio.Semaphore(concurrency)
    outcomes: dict[str, Fetched] = {}

    async def one(session_id: str) -> None:
        async with semaphore:
            try:
                outcomes[session_id] = await together.get_session_row(session_id, max_wait=max_wait)
            except TogetherError as exc:
                outcomes[session_id] = exc
            except Exception as exc:  # a bug must not sink the cycle
                log.exception("unexpected error polling session", extra={"session_id": session_id})
                outcomes[session_id] = TogetherError("bad_response", type(exc).__name__)

    await asyncio.gather(*(one(i) for i in ids))
    return outcomes


def _backoff(failures: int, interval: float, retry_after: float | None) -> float:
    if retry_after is not None:
        return max(retry_after, 1.0)
    return float(min(interval * 2 ** min(failures, 10), MAX_POLL_BACKOFF_SECONDS))


class Watched(Protocol):
    """What `observe` reads of a session's watch row."""

    @property
    def last_status(self) -> str: ...
    @property
    def transition_seq(self) -> int: ...
    @property
    def consecutive_failures(self) -> int: ...
    @property
    def checkpoint_keys(self) -> list[str] | None: ...
    @property
    def not_found_since(self) -> datetime | None: ...


def observe(
    row: Watched,
    fetched: TrainingSession | TogetherError,
    *,
    now: datetime,
    next_poll: datetime,
    confirm: timedelta,
    interval: float,
) -> tuple[dict[str, Any], list[SessionEvent]]:
    """What one poll result does to a session's watch: the columns to write and
    the events to tell, numbered on from `row.transition_seq`. Pure.

    A failure backs the session off; Together's own 404 is told as "gone" only
    once it has lasted `confirm`; a state is stored whole (`watch_state`) and
    its checkpoint news and status change become events."""
    if isinstance(fetched, TogetherError) and not fetched.sent:
        # Held back by a shared pause (another session's 429): ask again when it
        # ends; nothing went wrong with this session, so nothing is counted.
        return {"next_poll_at": now + timedelta(seconds=max(fetched.retry_after or 1.0, 1.0))}, []
    if isinstance(fetched, TogetherError):
        failures = row.consecutive_failures + 1
        since = row.not_found_since
        if fetched.kind == "not_found" and since is not None and now - since >= confirm:
            # Together's own "no such session", again and again for a while: gone.
            seq = row.transition_seq + 1
            return {
                "transition_seq": seq,
                "active": False,
                "consecutive_failures": 0,
                "not_found_since": None,
                "last_failure": "gone (404)",
                "next_poll_at": next_poll,
            }, [SessionEvent(seq, None, transition=gone(row.last_status))]
        if fetched.kind == "not_found":
            # Not yet confirmed: look again next interval, tell nothing.
            return {
                "consecutive_failures": failures,
                "not_found_since": since or now,
                "last_failure": "not found (404); confirming",
                "next_poll_at": next_poll,
            }, []
        delay = _backoff(failures, interval, fetched.retry_after)
        return {
            "consecutive_failures": failures,
            "not_found_since": None,
            "last_failure": str(fetched)[:300],
            "next_poll_at": now + timedelta(seconds=delay),
        }, []
    session = fetched
    seq = row.transition_seq
    found: list[SessionEvent] = []
    news = checkpoint_news(row.checkpoint_keys, session)
    if news:
        seq += 1
        found.append(SessionEvent(seq, session, checkpoints=news))
    change = detect(row.last_status, session)
    if change is not None:
        seq += 1
        found.append(SessionEvent(seq, session, transition=change))
    return watch_state(session) | {
        "transition_seq": seq,
        "consecutive_failures": 0,
        "not_found_since": None,
        "last_failure": None,
        "next_poll_at": next_poll,
        "active": not session.terminal,
    }, found


async def record_outcomes(
    db: AsyncSession,
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
    rows = (
        await db.execute(
            select(
                WatchedSession.session_id,
                WatchedSession.last_status,
                WatchedSession.transition_seq,
                WatchedSession.consecutive_failures,
                WatchedSession.checkpoint_keys,
                WatchedSession.not_found_since,
                WatchedSession.progress,
                WatchedSession.active,
                WatchedSession.write_failures,
                WatchedSession.last_failure,
                WatchedSession.fingerprint,
                db_now().label("db_now"),
            )
            .where(
                WatchedSession.session_id.in_(list(outcomes)),
                WatchedSession.lease_owner == owner,
                WatchedSession.lease_until > db_now(),
            )
            .with_for_update(of=WatchedSession)
        )
    ).all()
    owned = {r.session_id: r for r in rows}
    if len(owned) < len(outcomes):
        log.warning(
            "lost the lease on %d sessions; not writing their results",
            len(outcomes) - len(owned),
        )
    if rows:
        now = rows[0].db_now
    elif incidents:
        now = (await db.execute(select(db_now()))).scalar_one()
    else:
        return {}, 0
    next_poll = (polled_at or now) + timedelta(seconds=interval)
    confirm = timedelta(seconds=settings.not_found_confirm_seconds)
    stall_after = stall_settings(settings).stall_after

    events: dict[str, list[SessionEvent]] = {}
    state_updates: list[dict[str, Any]] = []
    for session_id, row in owned.items():
        fetched = outcomes[session_id]
        read = (reads or {}).get(session_id)
        fingerprint = None
        if isinstance(fetched, RawSession):
            fingerprint = fetched.fingerprint
            steady = _steady(row, fetched, now=now, stall_after=stall_after, read=read)
            if steady is not None:
                # The row as the last poll stored it: only what moves with time.
                state_updates.append(
                    {
                        "b_id": session_id,
                        "last_polled_at": now,
                        "next_poll_at": next_poll,
                        "progress": steady,
                    }
                )
                continue
            try:
                fetched = fetched.session()
            except ValueError:  # its head parsed, so this is not expected: not told
                fetched = TogetherError("bad_response", "invalid fields")
        values, found = observe(
            row,
            fetched,
            now=now,
            next_poll=next_poll,
            confirm=confirm,
            interval=interval,
        )
        if isinstance(fetched, TrainingSession):  # the step as this poll saw it
            values["progress"], progress, key = _watch_progress(
                row, fetched, now=now, stall_after=stall_after, read=read
            )
            if progress is not None:
                found.append(SessionEvent(values["transition_seq"], fetched, progress=progress))
            # the card is redrawn when what it shows changes: the resource, steps/min
            if key is not None and not fetched.terminal:
                found.append(
                    SessionEvent(
                        values["transition_seq"], fetched, watch=values["progress"], watch_key=key
                    )
                )
            # the row this state was built from; a later poll of the same row is steady
            values["fingerprint"] = fingerprint
        state_updates.append(
            {"b_id": session_id, "last_polled_at": now, "write_failures": 0} | values
        )
        if found:
            events[session_id] = found

    outbox_rows = await _write_events(db, events, settings=settings, now=now)
    if state_updates:
        await _update_states(db, state_updates, owner=owner)
    ended = [
        sid
        for sid, found in events.items()
        if any(e.transition is not None and e.transition.ended for e in found)
    ]
    if ended:
        await db.execute(
            update(Subscription)
            .where(Subscription.session_id.in_(ended), Subscription.active.is_(True))
            .values(active=False, ended_at=now, ended_reason="session ended")
            .execution_options(synchronize_session=False)
        )
    if incidents:
        await track_incidents(db, outcomes.values(), settings=settings, now=now)
    to_status: dict[str, int] = defaultdict(int)
    for found in events.values():
        for e in found:
            if e.transition is not None:
                to_status[short_status(e.transition.new_status)] += 1
    return dict(to_status), outbox_rows


def _steady(
    row: Any,
    fetched: RawSession,
    *,
    now: datetime,
    stall_after: timedelta | None,
    read: Read | None,
) -> dict[str, Any] | None:
    """The progress column to write when this poll changes nothing else, or None
    when it may (then the row is parsed and judged whole).

    Nothing else changes when the row is the one the stored state was built from
    (same fingerprint), the watch is live with no failure to clear, and neither
    the stall watch nor the spend watch owes a message: the status, checkpoints
    and snapshot are then those stored, so no transition or checkpoint is news.
    The progress is judged from the head, which has what it reads."""
    if not (
        row.fingerprint is not None
        and row.fingerprint == fetched.fingerprint
        and row.active
        and row.consecutive_failures == 0
        and row.not_found_since is None
        and row.write_failures == 0
        and row.last_failure is None
        and not fetched.head.terminal
    ):
        return None
    progress, check, key = _watch_progress(
        row, fetched.head, now=now, stall_after=stall_after, read=read
    )
    return progress if check is None and key is None else None


def _watch_progress(
    row: Any,
    session: TrainingSession,
    *,
    now: datetime,
    stall_after: timedelta | None,
    read: Read | None,
) -> tuple[dict[str, Any], ProgressCheck | None, str | None]:
    """The progress column after this poll (the step as seen, the spend watch's
    read), the stall watch's check when it may owe a message, and the card's watch
    key when what the card shows of the watch changed (None: it did not)."""
    progress, check = check_progress(row.progress, session, now=now, stall_after=stall_after)
    old_spend = row.progress.get("spend") if isinstance(row.progress, dict) else None
    spend = stored_spend(old_spend, read, now=now)
    if spend is not None:
        progress["spend"] = spend
    key = watch_key(progress)
    return progress, check, key if key is not None and key != watch_key(row.progress) else None


async def _update_states(db: AsyncSession, updates: list[dict[str, Any]], *, owner: str) -> None:
    # executemany needs the same columns in every row: group by column set.
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for values in updates:
        groups[tuple(sorted(k for k in values if k != "b_id"))].append(values)
    table = WatchedSession.__table__
    assert isinstance(table, Table)
    for columns, params in groups.items():
        stmt = (
            update(table)
            .where(and_(table.c.session_id == bindparam("b_id"), table.c.lease_owner == owner))
            .values(
                {c: bindparam(c) for c in columns}
                | {"lease_owner": None, "lease_until": None, "updated_at": db_now()}
            )
        )
        await db.execute(stmt, params)


async def _write_events(
    db: AsyncSession,
    events: dict[str, list[SessionEvent]],
    *,
    settings: Settings,
    now: datetime,
) -> int:
    """Write the rows the events owe (`notify.notifications` decides which): one
    read of the subscriptions, one of the alerts already sent, one insert."""
    if not events:
        return 0
    subs = await db.execute(
        select(
            Subscription.id,
            Subscription.session_id,
            Subscription.channel_id,
            Subscription.root_ts,
            Subscription.filters,
            Subscription.muted_until,
            Subscription.stall_after_minutes,
            Subscription.target_step,
        )
        .where(Subscription.session_id.in_(list(events)), Subscription.active.is_(True))
        .order_by(Subscription.id)
    )
    watchers = [
        Watcher(
            id=sub.id,
            session_id=sub.session_id,
            channel_id=sub.channel_id,
            root_ts=sub.root_ts,
            filters=frozenset(f for f in sub.filters.split(",") if f),
            muted_until=sub.muted_until,
            stall_after_minutes=sub.stall_after_minutes,
            target_step=sub.target_step,
        )
        for sub in subs
    ]
    owed = notifications(
        events,
        watchers,
        now=now,
        oncall_channel=settings.oncall_channel,
        stored_snapshots=await _snapshots_for_gone(db, events),
        stall=stall_settings(settings),
    )
    rows = owed.rows + await unalerted(db, owed.alerts, now=now)
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
    db: AsyncSession, events: dict[str, list[SessionEvent]]
) -> dict[str, Any]:
    """The stored snapshots of sessions Together no longer knows: their last word."""
    missing = [sid for sid, found in events.items() if any(e.session is None for e in found)]
    if not missing:
        return {}
    rows = await db.execute(
        select(WatchedSession.session_id, WatchedSession.snapshot).where(
            WatchedSession.session_id.in_(missing)
        )
    )
    return {r.session_id: r.snapshot for r in rows}
