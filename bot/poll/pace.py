"""How often the poller asks: the interval, claim sizes, slack and back-off.

The interval in use is the shortest that keeps a round of polls within
`TOGETHER_REQUESTS_PER_MINUTE`, after what the other consumers (here and on the
other replicas) spend, up to what leaves the poller its guaranteed share
(`POLL_BUDGET_SHARE`), and what the poller spends beside its plan (the spend
watch's reads). A round costs what the plan estimates or what the last rounds
were measured to spend, whichever is more: an estimate from what Together
said (a list that never ends, say) never outruns the budget for long. A failing session waits longer each time, up to
MAX_POLL_BACKOFF_SECONDS, or as long as Together's Retry-After says.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.settings.model import Settings
from bot.settings.timings import Timings
from bot.together.gate import Gate
from bot.together.poll_plan import Plan, Seen, budget_interval, budget_pages, round_cost

# The longest a failing session waits for its next poll.
MAX_POLL_BACKOFF_SECONDS = 900.0
# The side requests of a round are averaged over at least this long (`side_window`).
SIDE_WINDOW = 300.0
# The share of what the budget's gate gives the poll that its interval is sized to
# use: the rest is room for a round that costs more than planned, so the poll's own
# requests seldom wait for a share in the middle of a cycle.
GATE_HEADROOM = 0.95


@dataclass
class Planner:
    """This process's view of the project (what the last list pass saw) and the
    poll interval in use; kept across cycles, one per process."""

    seen: Seen | None = None
    interval: float | None = None
    clock: Callable[[], float] = time.monotonic
    # The poller's own requests beyond its plan in a round (the spend watch's
    # resource reads and prices), as the last cycles spent them.
    side: float = 0.0
    # The requests of its plan (list pages and GETs) a round was measured to take.
    planned: float = 0.0
    # What the other consumers spent in the last window, per minute, when the
    # interval was last sized (the other replicas' `remote` included).
    others: float = 0.0
    # What the other live replicas' consumers but their pollers spent a minute, as
    # they last reported it (`bot.jobs.spend_exchange`): the budget is the deployment's.
    remote: float = 0.0

    def interval_for(
        self,
        watched: int,
        plan: Plan,
        settings: Settings,
        *,
        others: float = 0.0,
        gate: Gate | None = None,
    ) -> float:
        """The shortest interval at which a round over `watched` sessions fits what
        the other consumers (`others` requests a minute here, `remote` on the other
        replicas) left of the budget; with the budget's `gate`, what its shares give
        the poll (the deployment's books: the other tiers' floors or spend, whichever
        is more), and the round's need at the shortest interval is told to it."""
        cost = max(round_cost(watched, self.seen, plan), self.planned) + self.side
        if gate is not None and gate.on:
            gate.need_poll(cost, settings.poll_min_interval_seconds)
            room = gate.poll_per_minute() * GATE_HEADROOM
            self.others = max(0.0, settings.together_requests_per_minute - room)
        else:
            self.others = guaranteed(others + self.remote, settings)
        self.interval = budget_interval(
            cost,
            requests_per_minute=settings.together_requests_per_minute,
            others_per_minute=self.others,
            min_seconds=settings.poll_min_interval_seconds,
            max_seconds=settings.poll_interval_seconds,
        )
        return self.interval

    def page_cap(self, settings: Settings) -> int:
        """The most list pages one pass may take: what the budget leaves a round at
        the longest interval, after the other consumers and the side cost."""
        return max(
            1,
            budget_pages(
                requests_per_minute=settings.together_requests_per_minute,
                others_per_minute=self.others,
                max_seconds=settings.poll_interval_seconds,
            )
            - int(self.side),
        )

    # (when, side requests, planned requests, sessions claimed) of the cycles in the
    # last `side_window`
    cycles: deque[tuple[float, int, int, int]] = field(default_factory=deque)
    side_window: float = SIDE_WINDOW

    def note_spend(self, side: int, *, planned: int = 0, claimed: int, watched: int) -> None:
        """The side and planned requests a round costs, averaged over the cycles of
        the last `side_window` seconds: the spend watch reads a resource once per
        SPEND_REFRESH_SECONDS, so one cycle reads many and the next ones none, and
        sizing from the last cycle alone would swing the interval with them. A tick
        that claimed and spent nothing is no cycle (most ticks are: the poll job
        ticks every few seconds and sessions fall due once an interval); counted,
        it made the average nothing and the side cost never stretched the interval."""
        if not claimed and not side and not planned:
            return
        now = self.clock()
        self.cycles.append((now, side, planned, claimed))
        while self.cycles and now - self.cycles[0][0] > self.side_window:
            self.cycles.popleft()
        polled = sum(c for *_, c in self.cycles)
        if polled:
            per_round = max(watched, claimed) / polled
            self.side = sum(c[1] for c in self.cycles) * per_round
            self.planned = sum(c[2] for c in self.cycles) * per_round


def guaranteed(others: float, settings: Settings) -> float:
    """What the other consumers' spend (`others` requests a minute) takes off the
    poller's budget: all of it, up to what leaves the poller its share
    (POLL_BUDGET_SHARE). A burst of commands is never made to wait (the budget
    holds nothing back), but neither does it stretch the poller's round past
    what its share buys; the deployment may then spend more than the budget for
    as long as the burst lasts."""
    rpm = settings.together_requests_per_minute
    if rpm <= 0:
        return others
    return min(others, rpm * (1.0 - settings.poll_budget_share))


def side_window(settings: Settings) -> float:
    """How long the poller's side cost is averaged over: at least two refreshes of
    the spend watch's reads (the fewer passes a window holds, the more one pass
    coming in or dropping out swings the interval)."""
    return max(SIDE_WINDOW, 2 * settings.spend_refresh_seconds)


def due_slack(settings: Settings) -> float:
    """How long before it is due a session may be claimed (the timing table's)."""
    return Timings.of(settings).due_slack


def poll_gap(interval: float, settings: Settings) -> float:
    """How long after this poll a session is next due, for the `interval` in use.

    A session is claimed up to `due_slack` before it is due. While the request
    budget sets the interval, that much is added, so no session is polled more
    often than the budget allows. At the fixed ends (POLL_MIN_INTERVAL_SECONDS,
    POLL_INTERVAL_SECONDS) nothing is: there the slack is what lets the tick at
    the interval's end claim it (with the slack added, a tick landing on the
    interval misses it by its jitter half the time and a change waits a whole
    tick more)."""
    budget_bound = settings.poll_min_interval_seconds < interval < settings.poll_interval_seconds
    return interval + due_slack(settings) if budget_bound else interval


def claim_size(settings: Settings) -> int:
    """Sessions per claim: what `TOGETHER_MAX_RPS` lets us fetch in half a lease."""
    fits = int(settings.together_max_rps * settings.lease_seconds / 2)
    return max(1, min(settings.poll_batch_size, fits))


def backoff(failures: int, interval: float, retry_after: float | None) -> float:
    """How long a session waits after `failures` failed polls in a row: doubling
    from the interval, capped, or Together's own Retry-After when it sent one."""
    if retry_after is not None:
        return max(retry_after, 1.0)
    return float(min(interval * 2 ** min(failures, 10), MAX_POLL_BACKOFF_SECONDS))
