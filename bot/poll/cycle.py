"""The poll cycle: claim due sessions, learn each once, judge, write the outbox.

One cycle drives the parts: it claims due sessions (`leases`), sizes the
interval (`pace`), learns their states the cheaper way (`fetch`), and stores
each bounded part as it comes (`isolate`, which writes through `record`, which
judges through `judge`), renewing the leases meanwhile; a batch that fails
hands back the leases it still holds. It loops while a claim comes back full;
the batches of one cycle share one list pass.

Statements per cycle do not depend on the number of subscriptions: one claim,
one lease update, a count of the watch, one re-read, one subscription read, one
outbox insert, one state update, a few incident statements.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from bot.alerts.resource_reader import ResourceReader
from bot.ops.faults import crash_point
from bot.poll.deps import PollDeps, PollState
from bot.poll.fetch import (
    MAX_LIST_PAGES,
    Fetched,
    Learnt,
    Write,
    after_the_pass,
    get_and_write,
    list_and_write,
)
from bot.poll.incidents import track_incidents
from bot.poll.isolate import store_apart
from bot.poll.leases import claim_due_sessions, keep_leases, release
from bot.poll.pace import Planner, claim_size, poll_gap
from bot.settings.model import Settings
from bot.store.tables import database_now
from bot.together.budget import PLANNED_KINDS, POLL, SIDE_KINDS, SPEND, charged_to
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.together.list_pass import Lister
from bot.together.poll_plan import LIVE_STATUSES, Plan, choose, justified_pages, max_pages
from bot.training.sessions import RawSession, TrainingSession

log = logging.getLogger(__name__)


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
    # sessions taken over from replicas that stopped, with how long each had waited
    adopted: dict[str, float] = field(default_factory=dict)
    renewals: int = 0  # lease renewals while the work ran
    released: int = 0  # sessions handed back by a batch that failed


async def poll_cycle(deps: PollDeps, state: PollState | None = None) -> CycleResult:
    """Poll every due session once; loops while a claim comes back full (the
    batches of one cycle share one list pass, and `state.resources`, the spend
    watch, reads each model resource once). Its Together requests are charged to
    the poller in the request budget. `state.wrote_rows` is called as soon as a
    part of a batch has written outbox rows, so delivery need not wait for the
    cycle's end."""
    with charged_to(POLL):
        return await _poll_cycle(deps, state or PollState())


@dataclass(frozen=True)
class _Cycle:
    """One cycle, handed to each of its batches as one value: the runtime's parts,
    the poller's kept state (with this cycle's list passes) and when it began."""

    deps: PollDeps
    planner: Planner
    lister: Lister
    resources: ResourceReader | None
    wrote_rows: Callable[[], None] | None
    started: float


async def _poll_cycle(deps: PollDeps, state: PollState) -> CycleResult:
    together, settings, planner = deps.together, deps.settings, state.planner
    lister = state.lister or Lister(together, clock=planner.clock)
    resources = state.resources
    if resources is not None:
        resources.begin_cycle()
    total = CycleResult()
    t0, started = time.monotonic(), lister.clock()
    cycle = _Cycle(deps, planner, lister, resources, state.wrote_rows, started)
    pages_before = lister.pages_fetched(LIVE_STATUSES)
    side_before = together.ledger.total(consumer=POLL, kinds=SIDE_KINDS)
    planned_before = together.ledger.total(consumer=POLL, kinds=PLANNED_KINDS)
    while True:
        result = await _poll_batch(cycle)
        total.adopted.update(result.adopted)
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
            "renewals",
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
    planned = together.ledger.total(consumer=POLL, kinds=PLANNED_KINDS) - planned_before
    planner.note_spend(side, planned=planned, claimed=total.claimed, watched=total.watched)
    total.list_pages = lister.pages_fetched(LIVE_STATUSES) - pages_before
    total.seconds = time.monotonic() - t0
    return total


async def _poll_batch(cycle: _Cycle) -> CycleResult:
    sessionmaker, settings, owner = cycle.deps.sessionmaker, cycle.deps.settings, cycle.deps.owner
    result = CycleResult()
    claim = await claim_due_sessions(sessionmaker, owner=owner, settings=settings)
    ids, polled_at, watched = claim.ids, claim.at, claim.watched
    result.claimed, result.watched, result.adopted = len(ids), watched, claim.adopted
    if not ids:
        return result
    crash_point("poll_after_claim", settings.fault_crash_at)
    try:
        await _work_batch(cycle, result, ids, polled_at=polled_at)
    except Exception:
        # A database blip, a bug: the sessions not written yet go back at once
        # (those written were handed back with their results), so the next tick,
        # here or on another replica, polls them instead of waiting out the lease.
        # If the database is still away, the lease runs out by itself.
        try:
            await release(sessionmaker, ids, owner=owner)
            result.released = len(ids)
            log.warning("poll batch failed; handed back its %d sessions' leases", len(ids))
        except Exception as exc:
            log.warning("poll batch failed and its leases could not be handed back: %s", exc)
        raise
    crash_point("poll_after_state_write", settings.fault_crash_at)
    return result


async def _work_batch(
    cycle: _Cycle, result: CycleResult, ids: list[str], *, polled_at: datetime | None
) -> None:
    """Fetch, judge and write one claimed batch into `result`, renewing its leases."""
    planner, lister, resources = cycle.planner, cycle.lister, cycle.resources
    sessionmaker, together = cycle.deps.sessionmaker, cycle.deps.together
    settings, owner = cycle.deps.settings, cycle.deps.owner
    watched = result.watched
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
        ahead = await claim_due_sessions(
            sessionmaker,
            owner=owner,
            settings=settings,
            ahead=planner.interval or settings.poll_interval_seconds,
            limit=claim_size(settings) - len(ids),
        )
        more = ahead.ids
        result.adopted.update(ahead.adopted)
        worth = choose(len(ids) + len(more), planner.seen, now=clock, forced=forced)
        if more and worth is Plan.LIST:
            ids += more
            result.plan = Plan.LIST
            result.claimed = len(ids)
        elif more:  # not worth a pass after all (another replica holds the rest)
            await release(sessionmaker, more, owner=owner)

    if resources is not None:
        resources.expect(len(ids))  # handed over a page at a time: one pass for them all
    result.interval = planner.interval_for(
        watched,
        result.plan,
        settings,
        others=together.ledger.others_per_minute(),
        gate=together.gate,
    )

    # Sit out a short 429 pause; a long one backs the sessions off instead, so the
    # cycle ends well inside its leases. A slow Together is covered by renewing them.

    def renewed(n: int) -> None:
        result.renewals += n

    renewing = asyncio.create_task(
        keep_leases(
            sessionmaker, ids, owner=owner, lease_seconds=settings.lease_seconds, renewed=renewed
        )
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
        # the spend watch: each model resource once per cycle; a failed read is left out,
        # and a read that fails in any other way leaves this part's news to go on without
        reads = None
        if resources is not None:
            try:
                with charged_to(SPEND):  # the idle and spend tier's, refused without a share
                    reads = await resources.read(
                        s.head if isinstance(s, RawSession) else s
                        for s in part.values()
                        if not isinstance(s, TogetherError)
                    )
            except Exception:
                log.exception("the spend watch could not read this part's model resources")
        to_status, rows = await store_apart(
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
        if rows and cycle.wrote_rows is not None:
            cycle.wrote_rows()

    try:
        learnt = await learn(
            together,
            lister,
            planner,
            ids,
            plan=result.plan,
            pages=pass_pages(len(ids), watched, planner, settings, forced=forced),
            since=cycle.started,
            settings=settings,
            write=write,
        )
        result.gets, result.from_error_pages = learnt.gets, learnt.from_error_pages
        # Incidents are judged once, over the whole batch, as when it was one write.
        async with sessionmaker() as db, db.begin():
            now = await database_now(db)
            await track_incidents(db, reach.results(), settings=settings, now=now)
    finally:
        renewing.cancel()
    result.transitions = sum(result.to_status.values())


def pass_pages(
    due: int, watched: int, planner: Planner, settings: Settings, *, forced: Plan | None
) -> int:
    """The most pages this batch's list pass may take: what the project's known size
    justifies, or, while nothing is known of it (or POLL_PLAN=list forces the list),
    as much as the budget leaves a round if that is more; and no more than the
    GETs it replaces (unless forced). A list whose cursor never ends is cut there."""
    pages = justified_pages(watched, planner.seen)
    if forced is Plan.LIST or planner.seen is None:
        pages = max(pages, planner.page_cap(settings))
    return min(pages, MAX_LIST_PAGES if forced is Plan.LIST else max_pages(due))


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
    write: Write,
) -> Learnt:
    """Learn the state of each of `ids` by `plan` and hand it to `write` a bounded
    part at a time (`fetch`). The list plan also updates what `planner` has seen of
    the project, as soon as the pass is read: a write that fails later keeps it."""
    if plan is Plan.GET:
        return Learnt(gets=await get_and_write(together, ids, settings=settings, write=write))
    listing = await list_and_write(
        lister, ids, pages=pages, since=since, before=planner.seen, write=write
    )
    previous, planner.seen = planner.seen, listing.seen
    return await after_the_pass(
        together, lister, listing, previous=previous, settings=settings, write=write
    )


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
