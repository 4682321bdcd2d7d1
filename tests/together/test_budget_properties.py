"""The request budget's invariant, as a property: with every watch on, several
replicas and more work than the budget holds, whatever the people ask,

- no rolling minute holds more requests than TOGETHER_REQUESTS_PER_MINUTE, but
  for what people asked beyond their floor in it;
- no periodic job with work goes more than a quarter of a minute (a slice, the
  time a grant may take to be sent, and one retry) without sending a request,
  on any replica, nor does one that rested long enough for its tier to go
  quiet (its floor then the poll's) wait longer for a request;
- people's requests are never held.

The replicas' real gates (`bot.together.gate.Gate`, with the shares of
`bot.together.shares` for settings with every watch on) are driven on a virtual
clock against a model of the deployment: the books are one list, read and
written whole by each reservation (as the database's lock makes them), the
jobs are the bot's (the poll's rounds and the spend watch's reads on every
replica; the error watch, follow discovery and the idle watch each on one
replica at a time), each asking for as many requests as the case gives it, and
the model of Together counts what arrives. No database, no HTTP."""

from __future__ import annotations

import asyncio
import math
import random
import selectors
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.settings.model import Settings
from bot.store.queries.together_grants import (
    ASK,
    MAX_RETRY_SECONDS,
    MIN_RETRY_SECONDS,
    first_in_line,
    spent_in,
    steady_tiers,
)
from bot.together.budget import charged_to
from bot.together.gate import GRANT_SECONDS, SLICES, Booked, BudgetRefused, Decide, Gate
from bot.together.shares import Shares, Tier, running_tiers, tier_of
from tests.support import examples

MINUTE = 60.0
SLICE = MINUTE / SLICES
BOOKS = SLICE + GRANT_SECONDS
#: the longest a periodic job with work goes without sending: its tier's floor comes
#: back within a slice of the books, and it asks again at most a retry later
STARVE_BOUND = BOOKS + MAX_RETRY_SECONDS
#: people's requests are booked by the heartbeat this often
HEARTBEAT = 3.0
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
#: the longest a job rests between two runs in the model (but the sleepers')
REST = 2.0
#: the rests of a job that may sleep: its tier goes quiet (no ask in a window)
SLEEPS = (REST, 20.0, 45.0)
TIERED = ("poll", "watch_errors", "follow", "watch_idle")
EVERY_WATCH = Settings(
    _env_file=None,
    watch_all_errors=True,
    watch_idle_resources=True,
    oncall_channel="COPS",
    spend_watch=True,
)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0


class _VirtualSelector(selectors.BaseSelector):
    """No file is ever ready; waiting for `timeout` moves the clock instead."""

    def __init__(self, clock: _Clock) -> None:
        self.clock = clock
        self._map: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = selectors.SelectorKey(fileobj, 0, events, data)
        self._map[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._map.pop(fileobj)

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout:
            self.clock.now += timeout
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._map


class _VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: _Clock) -> None:
        self.clock = clock
        super().__init__(selector=_VirtualSelector(clock))

    def time(self) -> float:
        return self.clock.now


@dataclass
class Books:
    """The deployment's books: (when, owner, tier, n), one reservation at a time, with
    the replicas waiting on a tier in line (`first_in_line`, the store's own rule)."""

    clock: _Clock
    rows: list[tuple[float, str, str, int]] = field(default_factory=list)

    def reserve(self, owner: str, tier: str, decide: Decide, waits: bool) -> Booked:
        now = self.clock.now
        books = [(t, n, at - now) for at, _, t, n in self.rows if at > now - 2 * BOOKS]
        spent = spent_in(books, BOOKS)
        live = [r for r in self.rows if r[0] > now - BOOKS and r[3] > 0]
        marks: dict[str, tuple[datetime, datetime]] = {}
        for at, o, t, n in self.rows:
            if t == tier and n == 0:
                first, last = marks.get(o, (_when(at), _when(at)))
                marks[o] = (min(first, _when(at)), max(last, _when(at)))
        ahead = not first_in_line(owner, marks, now=_when(now))
        granted = 0 if ahead else max(0, decide(spent, steady_tiers(books, BOOKS)))
        if granted:
            self.rows = [r for r in self.rows if not (r[1] == owner and r[2] == tier and r[3] == 0)]
            self.rows.append((now, owner, tier, granted))
            return Booked(granted, spent, 0.0)
        self.rows.append((now, owner, tier, 0 if waits else ASK))
        retry = MAX_RETRY_SECONDS
        if live:
            leaves = min(r[0] for r in live) + BOOKS - now
            retry = min(MAX_RETRY_SECONDS, max(MIN_RETRY_SECONDS, leaves))
        return Booked(0, spent, retry)


def _when(seconds: float) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


@dataclass
class Case:
    budget: int  # requests a minute
    replicas: int
    seconds: float
    # requests each job asks for per run, and how long it rests between runs
    poll_round: int
    errors_run: int
    follow_run: int
    idle_run: int
    spend_reads: int
    # the longest rest of the error watch, follow discovery and the idle watch
    errors_rest: float
    follow_rest: float
    idle_rest: float
    # the people's requests: (when, how many at once)
    people: list[tuple[float, int]]
    seed: int


@st.composite
def _cases(draw: st.DrawFn) -> Case:
    seconds = 150.0
    people = sorted(
        (draw(st.floats(0, seconds - 1)), draw(st.integers(1, 40)))
        for _ in range(draw(st.integers(0, 8)))
    )
    return Case(
        budget=draw(st.sampled_from([20, 60, 120, 240])),
        replicas=draw(st.integers(1, 3)),
        seconds=seconds,
        poll_round=draw(st.integers(1, 30)),
        errors_run=draw(st.integers(1, 10)),
        follow_run=draw(st.integers(1, 10)),
        idle_run=draw(st.integers(1, 40)),
        spend_reads=draw(st.integers(0, 20)),
        errors_rest=draw(st.sampled_from(SLEEPS)),
        follow_rest=draw(st.sampled_from(SLEEPS)),
        idle_rest=draw(st.sampled_from(SLEEPS)),
        people=people,
        seed=draw(st.integers(0, 2**32 - 1)),
    )


@dataclass
class Run:
    """What the model of Together saw: (when, consumer) of every request."""

    sent: list[tuple[float, str]] = field(default_factory=list)
    # (when, replica) of each poll request: every replica's poll goes on
    polls: list[tuple[float, int]] = field(default_factory=list)
    # (consumer, when it asked, when it was let go) of every periodic request
    waits: list[tuple[str, float, float]] = field(default_factory=list)
    people_held: int = 0


async def _simulate(case: Case, clock: _Clock) -> tuple[Run, Shares]:
    rnd = random.Random(case.seed)
    settings_ = EVERY_WATCH.model_copy(update={"together_requests_per_minute": case.budget})
    shares = Shares.of(case.budget * SLICE / MINUTE, running_tiers(settings_))
    books = Books(clock)

    def reserve_as(owner: str) -> Any:
        async def reserve(tier: str, decide: Decide, waits: bool) -> Booked:
            await asyncio.sleep(0.001 * rnd.random())  # a database round trip
            return books.reserve(owner, tier, decide, waits)

        return reserve

    gates = [
        Gate(shares, reserve_as(f"r{n}"), window=BOOKS, clock=lambda: clock.now)
        for n in range(case.replicas)
    ]
    run = Run()
    end = case.seconds

    async def send(gate: Gate, consumer: str) -> None:
        asked = clock.now
        await gate.take(consumer)
        if tier_of(consumer) is Tier.PEOPLE:
            if clock.now != asked:
                run.people_held += 1
        else:
            run.waits.append((consumer, asked, clock.now))
        run.sent.append((clock.now, consumer))
        if consumer == "poll":
            run.polls.append((clock.now, gates.index(gate)))

    async def poll(gate: Gate) -> None:
        with charged_to("poll"):
            while clock.now < end:
                gate.need_poll(case.poll_round, 1.0)
                await asyncio.gather(*(send(gate, "poll") for _ in range(case.poll_round)))
                with charged_to("spend"):
                    for _ in range(case.spend_reads):
                        try:
                            await send(gate, "spend")
                        except BudgetRefused:
                            break  # the rest next cycle
                await asyncio.sleep(rnd.uniform(0.25, REST))

    async def exclusive(consumer: str, size: int, rest: float) -> None:
        """One replica at a time runs the job; which one changes between runs."""
        with charged_to(consumer):
            while clock.now < end:
                gate = rnd.choice(gates)
                for _ in range(size):
                    await send(gate, consumer)
                    if clock.now >= end:
                        return
                await asyncio.sleep(rnd.uniform(0.5, rest))

    async def people() -> None:
        for at, n in case.people:
            await asyncio.sleep(max(0.0, at - clock.now))
            gate = rnd.choice(gates)
            await asyncio.gather(*(send(gate, "command") for _ in range(n)))

    async def heartbeat(gate: Gate) -> None:
        while clock.now < end + HEARTBEAT:
            await asyncio.sleep(HEARTBEAT)
            await gate.book_people()

    tasks = [asyncio.create_task(poll(g)) for g in gates]
    tasks += [asyncio.create_task(heartbeat(g)) for g in gates]
    tasks += [
        asyncio.create_task(exclusive("watch_errors", case.errors_run, case.errors_rest)),
        asyncio.create_task(exclusive("follow", case.follow_run, case.follow_rest)),
        asyncio.create_task(exclusive("watch_idle", case.idle_run, case.idle_rest)),
        asyncio.create_task(people()),
    ]
    await asyncio.sleep(end)
    for gate in gates:
        gate.close()  # whatever still waits ends now, as at a replica's shutdown
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(r is None or isinstance(r, BudgetRefused) for r in results), results
    return run, shares


def _run(case: Case) -> tuple[Run, Shares]:
    clock = _Clock()
    loop = _VirtualLoop(clock)
    try:
        return loop.run_until_complete(_simulate(case, clock))
    finally:
        loop.close()


@settings(max_examples=examples(40), deadline=None)
@given(case=_cases())
def test_no_rolling_minute_exceeds_the_budget_and_no_job_with_work_starves(case: Case) -> None:
    run, shares = _run(case)
    people_floor = SLICES * shares.floor(Tier.PEOPLE)
    times = [t for t, _ in run.sent]
    # No rolling minute holds more than the budget, but for what people asked beyond
    # their floor in it.
    j = 0
    people_in = 0
    for i, (start, _) in enumerate(run.sent):
        while j < len(run.sent) and run.sent[j][0] < start + MINUTE:
            people_in += tier_of(run.sent[j][1]) is Tier.PEOPLE
            j += 1
        beyond = max(0, people_in - people_floor)
        assert j - i <= case.budget + beyond, (start, j - i, beyond)
        people_in -= tier_of(run.sent[i][1]) is Tier.PEOPLE
    assert times == sorted(times)
    # People are never held.
    assert run.people_held == 0
    # Every periodic job had work whenever it was not resting: none went longer than
    # a quarter of a minute and a retry without sending (and its own rest between
    # runs), nor did any replica's poll (the replicas waiting on a tier are served in
    # turn). A replica's poll shares its tier's floor with the others' in turn: at
    # the least a request every slice per floor's worth of the replicas' rounds.
    rests = {
        "poll": REST,
        "watch_errors": case.errors_rest,
        "follow": case.follow_rest,
        "watch_idle": case.idle_rest,
    }
    # A job that slept long enough for its tier to go quiet waits no longer: at most
    # a slice for the poll to give its floor back, and a retry.
    wait_bound = BOOKS + MAX_RETRY_SECONDS
    streams = {c: ([t for t, s in run.sent if s == c], 1, rests[c]) for c in TIERED}
    turns = math.ceil(case.replicas * case.poll_round / max(1, shares.floor(Tier.POLL)))
    for r in range(case.replicas):
        streams[f"poll@{r}"] = ([t for t, n in run.polls if n == r], turns, REST)
    for name, (sent, slices, rest) in streams.items():
        assert sent, name
        gaps = [b - a for a, b in zip([0.0, *sent], [*sent, case.seconds], strict=True)]
        assert max(gaps) <= slices * BOOKS + MAX_RETRY_SECONDS + rest, (name, max(gaps))
    for consumer, asked, sent_at in run.waits:
        if consumer in rests and consumer != "poll":
            assert sent_at - asked <= wait_bound, (consumer, asked, sent_at - asked)


def test_the_floors_and_the_free_part_of_a_busy_minute() -> None:
    """The shares of 120 requests a minute with every watch on, a slice at a time:
    each tier's floor, what is free, what the poll may plan on."""
    shares = Shares.of(120 * SLICE / MINUTE, running_tiers(EVERY_WATCH))
    assert dict(shares.floors) == {
        Tier.PEOPLE: 3,
        Tier.POLL: 15,
        Tier.ERRORS: 3,
        Tier.FOLLOW: 3,
        Tier.IDLE: 3,
    }
    assert shares.free == 3
    asking = {Tier.ERRORS: 0, Tier.FOLLOW: 0, Tier.IDLE: 0}  # every tier below asks
    assert shares.poll_capacity(asking) == 18
    # people beyond their floor: the poll gives back the free part first, never its floor
    assert shares.poll_capacity({**asking, Tier.PEOPLE: 5}) == 16
    assert shares.poll_capacity({**asking, Tier.PEOPLE: 100}) == 15
    # a quiet tier (neither spent nor asked in the window) leaves its floor to the poll
    assert shares.poll_capacity({Tier.ERRORS: 0}) == 24
    assert shares.poll_capacity({}) == 27
    # a lower tier that spent within its floor is never refused, whatever the others spent
    assert shares.allowance(Tier.IDLE, {Tier.IDLE: 1, Tier.POLL: 30, Tier.PEOPLE: 50}) == 2
    # beyond it, it leaves the poll what its round needs of the free part
    assert shares.allowance(Tier.IDLE, {**asking, Tier.IDLE: 3}, poll_need=30) == 0
    assert shares.allowance(Tier.IDLE, {**asking, Tier.IDLE: 3}, poll_need=0) == 3
    # a tier that wakes takes its floor only once the poll gave it wholly back
    assert shares.allowance(Tier.FOLLOW, {Tier.POLL: 27}) == 0
    assert shares.allowance(Tier.FOLLOW, {Tier.FOLLOW: 0, Tier.POLL: 25}) == 0
    assert shares.allowance(Tier.FOLLOW, {Tier.FOLLOW: 0, Tier.POLL: 24}) == 3
    # people beyond their floor never keep it from it (they are counted at their floor)
    assert shares.allowance(Tier.FOLLOW, {Tier.POLL: 15, Tier.PEOPLE: 50}) == 3
    assert shares.allowance(Tier.PEOPLE, {Tier.PEOPLE: 500}) is None


def test_a_tier_is_steady_once_it_asked_all_along_for_a_window() -> None:
    """Rows (tier, requests, seconds from now): a tier is steady when a row of it
    came at least every window, from one before the window began."""
    w = BOOKS
    assert steady_tiers([("idle", 3, -w - 1), ("idle", 0, -w / 2)], w) == {"idle"}
    # a gap of a window or more: it went quiet, and woke since
    assert steady_tiers([("idle", 3, -2 * w + 0.1), ("idle", 0, -0.1)], w) == frozenset()
    # asking only since less than a window ago: waking, not steady
    assert steady_tiers([("follow", -1, -w / 2), ("follow", 0, -1.0)], w) == frozenset()
    # quiet now: nothing in the window
    assert steady_tiers([("errors", 2, -w - 1)], w) == frozenset()
    assert spent_in([("idle", 3, -1.0), ("idle", 0, -2.0), ("follow", -1, -1.0)], w) == {
        "idle": 3,
        "follow": 0,
    }
