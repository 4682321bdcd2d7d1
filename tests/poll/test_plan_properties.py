"""The poll plan against a model of Together, as a property: whatever the list
looks like (any number of live sessions, pages of any size, even varying, a
cursor that ends early, comes round again or never ends, a page that fails),
whatever the budget and however many replicas share the work, every session a
cycle claims is learnt in that cycle: read on a page of its pass, or asked for
by its own GET. Only the session's own answer makes a failed poll, and a cycle
costs at most one GET per claimed session plus the pages it read.

Pure: the plan's own code (`choose`, `pass_pages`, `learn` and the shared
list pass) is driven against `ModelTogether`, which answers the two calls the
plan makes; no database, no HTTP."""

from __future__ import annotations

import asyncio
import math
import random
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.poll.cycle import learn, pass_pages
from bot.poll.fetch import Fetched
from bot.poll.pace import Planner
from bot.settings.model import Settings
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.together.list_pass import SHARE_SECONDS, Lister, list_pass
from bot.together.poll_plan import LIVE_STATUSES, Plan, choose, pages_for
from bot.training.sessions import RawSession
from tests.support import examples

RUNNING = "TRAINING_SESSION_STATUS_RUNNING"
STOPPED = "TRAINING_SESSION_STATUS_STOPPED"


def _sid(i: int) -> str:
    return f"s{i:07d}-0000-0000-0000-000000000000"


@cache
def _settings(plan: str, requests_per_minute: float) -> Settings:
    return Settings(
        _env_file=None, poll_plan=plan, together_requests_per_minute=requests_per_minute
    )


@dataclass
class Shape:
    """How Together's list behaves in one cycle."""

    page_sizes: list[int]  # rows of page k: page_sizes[k % len]; 1-100
    ends_early: int | None = None  # page after which it says there is no more
    repeats_at: int | None = None  # page whose cursor is one already handed out
    endless: bool = False  # past the last row: empty pages with fresh cursors, forever
    failing_page: int | None = None  # page answered with an error (an HTML 404, say)


@dataclass
class ModelTogether:
    """Together as the plan sees it: the live sessions in list order, served a
    page at a time as `shape` says, and every session's own GET (failing for
    `failing_gets`, ended for the watched sessions not live). Counts requests."""

    live: list[str]
    shape: Shape
    failing_gets: frozenset[str] = frozenset()
    pages: int = 0
    gets: Counter[str] = field(default_factory=Counter)
    served: set[str] = field(default_factory=set)  # ids sent on a page

    def __post_init__(self) -> None:
        self.is_live = frozenset(self.live)

    def _page(self, k: int) -> tuple[list[str], str | None]:
        sizes = self.shape.page_sizes
        start = sum(sizes[i % len(sizes)] for i in range(k))
        ids = self.live[start : start + sizes[k % len(sizes)]]
        more = start + len(ids) < len(self.live)
        if self.shape.ends_early is not None and k >= self.shape.ends_early:
            more = False
        if self.shape.repeats_at is not None and k >= self.shape.repeats_at and more:
            return ids, str(max(1, k))  # handed out before (page k's own, or page 1's)
        if not more and self.shape.endless:
            return ids, str(k + 1)
        return ids, str(k + 1) if more else None

    async def list_session_rows(
        self,
        *,
        status: Any = None,
        created_by: str | None = None,
        after: str | None = None,
        limit: int = 100,
        sent: asyncio.Event | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        assert tuple(status) == LIVE_STATUSES and created_by is None and limit == 100
        if sent is not None:
            sent.set()
        await asyncio.sleep(0)
        k = int(after) if after else 0
        self.pages += 1
        if k == self.shape.failing_page:
            raise TogetherError("bad_response", "an HTML page, not JSON")
        ids, cursor = self._page(k)
        self.served.update(ids)
        return [{"id": sid, "status": RUNNING} for sid in ids], cursor

    async def get_session_row(
        self, session_id: str, *, max_wait: float | None = None
    ) -> RawSession:
        await asyncio.sleep(0)
        self.gets[session_id] += 1
        if session_id in self.failing_gets:
            raise TogetherError("unavailable", "timed out")
        status = RUNNING if session_id in self.is_live else STOPPED
        return RawSession.of({"id": session_id, "status": status})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@st.composite
def _shapes(draw: st.DrawFn) -> Shape:
    odd = draw(st.sampled_from(["none", "none", "early", "repeat", "endless", "fail"]))
    return Shape(
        page_sizes=draw(
            st.one_of(
                st.lists(st.integers(1, 100), min_size=1, max_size=1),
                st.lists(st.integers(1, 5), min_size=1, max_size=4),
                st.lists(st.integers(1, 100), min_size=2, max_size=6),
            )
        ),
        ends_early=draw(st.integers(0, 6)) if odd == "early" else None,
        repeats_at=draw(st.integers(0, 6)) if odd == "repeat" else None,
        endless=odd == "endless",
        failing_page=draw(st.integers(0, 6)) if odd == "fail" else None,
    )


@dataclass
class Case:
    live: int
    watched: list[int]  # indexes; those >= live have ended
    replicas: int
    plan: str
    requests_per_minute: float
    others: float
    # per cycle: the list's shape, the sessions each replica claims (those due),
    # whose GET fails, and which of the live ones have ended by then
    cycles: list[tuple[Shape, list[list[int]], frozenset[int], frozenset[int]]]


@st.composite
def _cases(draw: st.DrawFn) -> Case:
    live = draw(st.integers(0, 1000))
    pool = live + draw(st.integers(0, 20))  # the rest have ended
    # Per-row choices from a PRNG seeded by one draw: hypothesis' own randoms make
    # every choice a draw, which cost half the test's time for up to 1,000 rows.
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    watched = sorted(rnd.sample(range(pool), draw(st.integers(0, pool))))
    replicas = draw(st.integers(1, 3))
    cycles = []
    gone: frozenset[int] = frozenset()
    for _ in range(draw(st.integers(1, 3))):
        due = draw(st.sampled_from([1.0, 1.0, 0.5, 0.1]))
        owner = [rnd.randrange(replicas) if rnd.random() < due else -1 for _ in watched]
        claims = [
            [w for w, o in zip(watched, owner, strict=True) if o == r] for r in range(replicas)
        ]
        failing = frozenset(rnd.sample(watched, min(len(watched), draw(st.integers(0, 5)))))
        gone |= frozenset(rnd.sample(range(live), min(live, draw(st.integers(0, 10)))))
        cycles.append((draw(_shapes()), claims, failing, gone))
    return Case(
        live=live,
        watched=watched,
        replicas=replicas,
        plan=draw(st.sampled_from(["auto", "auto", "auto", "list", "get"])),
        requests_per_minute=draw(st.sampled_from([0.0, 10.0, 120.0, 600.0, 6000.0])),
        others=draw(st.sampled_from([0.0, 5.0, 100.0])),
        cycles=cycles,
    )


async def _cycle(
    case: Case, planner: Planner, clock: Clock, model: ModelTogether, ids: list[str]
) -> set[str]:
    """One replica's cycle over its claim, as the poll cycle runs it; checks the
    promise and returns the claimed sessions left unread (none, if it holds)."""
    settings_ = _settings(case.plan, case.requests_per_minute)
    forced = None if case.plan == "auto" else Plan(case.plan)
    together = cast(TogetherClient, model)
    lister = Lister(together, clock=clock)
    written: Counter[str] = Counter()
    outcomes: dict[str, Fetched] = {}

    async def write(part: dict[str, Fetched]) -> None:
        written.update(part.keys())
        outcomes.update(part)

    plan = choose(len(ids), planner.seen, now=clock(), forced=forced)
    planner.interval_for(len(case.watched), plan, settings_, others=case.others)
    pages = pass_pages(len(ids), len(case.watched), planner, settings_, forced=forced)
    learnt = await learn(
        together,
        lister,
        planner,
        ids,
        plan=plan,
        pages=pages,
        since=clock(),
        settings=settings_,
        write=write,
    )
    lister.forget(LIVE_STATUSES)
    # Every claimed session is written once, in this cycle.
    assert set(written) == set(ids) and all(n == 1 for n in written.values())
    for sid, outcome in outcomes.items():
        if isinstance(outcome, TogetherError):
            # a failed poll only from the session's own answer
            assert model.gets[sid] == 1 and sid in model.failing_gets, (sid, outcome)
        else:  # its state as Together has it, from a page or its GET
            assert outcome.id == sid and (model.gets[sid] == 1 or sid in model.served)
            assert outcome.head.status == (RUNNING if sid in model.is_live else STOPPED)
    # At most a GET per claimed session, none for one read on a page, plus the pages.
    assert set(model.gets) <= set(ids) and max(model.gets.values(), default=0) <= 1
    assert set(model.gets).isdisjoint(model.served)
    assert learnt.gets == sum(model.gets.values())
    if plan is Plan.GET:
        assert model.pages == 0 and learnt.gets == len(ids)
    else:
        assert 1 <= model.pages <= pages
    return {sid for sid in ids if not model.gets[sid] and sid not in model.served}


async def _run(case: Case) -> None:
    clock = Clock()
    planners = [Planner(clock=clock) for _ in range(case.replicas)]
    for shape, claims, failing, gone in case.cycles:
        live = [_sid(i) for i in range(case.live) if i not in gone]
        for planner, claim in zip(planners, claims, strict=True):
            if claim:
                model = ModelTogether(live, shape, frozenset(_sid(i) for i in failing))
                unread = await _cycle(case, planner, clock, model, [_sid(i) for i in claim])
                # read this cycle, so never unread two cycles running
                assert not unread, sorted(unread)[:5]
        clock.now += max(p.interval or 0.0 for p in planners) + SHARE_SECONDS + 1


@settings(max_examples=examples(150), deadline=None)
@given(case=_cases())
def test_every_claimed_session_is_learnt_in_its_cycle(case: Case) -> None:
    asyncio.run(_run(case))


async def _one_pass(live: int, sizes: list[int]) -> tuple[int, float | None, bool]:
    model = ModelTogether([_sid(i) for i in range(live)], Shape(page_sizes=sizes))
    listed = await list_pass(cast(TogetherClient, model), LIVE_STATUSES, max_pages=2000)
    return listed.pages, listed.rows_per_page(), listed.complete


@settings(max_examples=examples(100), deadline=None)
@given(
    live=st.integers(0, 1000),
    size=st.integers(1, 100),
    sizes=st.lists(st.integers(1, 100), min_size=2, max_size=6),
)
def test_a_pass_is_costed_in_the_rows_the_server_sends(
    live: int, size: int, sizes: list[int]
) -> None:
    pages, per_page, complete = asyncio.run(_one_pass(live, [size]))
    assert complete and pages == max(1, math.ceil(live / size))
    if pages > 1:  # each page but the last held `size` rows: the estimate is the real cost
        assert per_page == size and pages_for(live, per_page) == pages
    else:
        assert per_page is None
    # Pages of varying size: the estimate is a page size the server sent.
    pages, per_page, complete = asyncio.run(_one_pass(live, sizes))
    assert complete
    if pages > 1:
        assert per_page is not None and min(sizes) <= per_page <= max(sizes)
