"""The Together request budget: every request the bot sends, counted where it is sent.

`TOGETHER_REQUESTS_PER_MINUTE` is what the whole process may spend, not only
the poller. The Together client records each request it sends (after any
rate-limit wait, so one held back is not counted) in a `Ledger`, by kind
(`get`, `list_page`, `stop`, `resource_get`, `resource_list_page`,
`estimate_cost`, `resource_stop`) and by consumer: whoever the request is
charged to, a context variable that asyncio tasks inherit from the code that
starts them. The scheduler's jobs charge their own name (`poll`,
`watch_errors`, `watch_idle`, `watch_subscribed_idle`, `follow`, `deliver`; the
spend watch's reads in the poll cycle `spend`); everything else is a person's
`command`. The ledger is this process's own count (for /metrics and the poll's
measured round); what each consumer may send is the request budget's gate's to
say (`bot.together.gate`, by the shares of `bot.together.shares`), from the
deployment's books in the database.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: the poller: its session GETs and list pages are its planned round; anything else it
#: sends (the spend watch's resource reads and prices) is its side cost per cycle
POLL = "poll"
#: the spend watch's reads in the poll cycle (the idle and spend tier of the budget)
SPEND = "spend"
COMMAND = "command"
#: what one request of each kind is called (on /metrics too)
KINDS = (
    "get",
    "list_page",
    "stop",
    "resource_get",
    "resource_list_page",
    "estimate_cost",
    "resource_stop",
    "resource_extend",
    "checkpoint_download",
)
#: the kinds a poll plan is made of (see `bot.together.poll_plan`)
PLANNED_KINDS = frozenset({"get", "list_page"})
SIDE_KINDS = frozenset(KINDS) - PLANNED_KINDS
DEFAULT_WINDOW_SECONDS = 60.0

_consumer: ContextVar[str] = ContextVar("together_consumer", default=COMMAND)


def consumer() -> str:
    """Who the requests sent from here are charged to."""
    return _consumer.get()


@contextmanager
def charged_to(name: str) -> Iterator[None]:
    """Charge the Together requests sent in this block (and in the tasks it starts) to `name`."""
    token = _consumer.set(name)
    try:
        yield
    finally:
        _consumer.reset(token)


Spent = Callable[[str, str], None]


class Ledger:
    """The requests of the last `window` seconds, and running totals since start."""

    def __init__(
        self,
        *,
        window: float = DEFAULT_WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        on_spend: Spent | None = None,
    ) -> None:
        self.window = window
        self.clock = clock
        self.on_spend = on_spend
        self._recent: deque[tuple[float, str, str]] = deque()
        self._totals: dict[tuple[str, str], int] = {}

    def spend(self, kind: str) -> None:
        """Record one request of `kind`, charged to the current consumer."""
        who = consumer()
        now = self.clock()
        self._recent.append((now, who, kind))
        self._trim(now)
        self._totals[(who, kind)] = self._totals.get((who, kind), 0) + 1
        if self.on_spend is not None:
            self.on_spend(kind, who)

    def total(self, *, consumer: str | None = None, kinds: Iterable[str] | None = None) -> int:
        """Requests since start, of `consumer` (None: anyone) and `kinds` (None: any)."""
        wanted = None if kinds is None else frozenset(kinds)
        return sum(
            n
            for (who, kind), n in self._totals.items()
            if (consumer is None or who == consumer) and (wanted is None or kind in wanted)
        )

    def others_per_minute(self) -> float:
        """What every consumer but the poller spent in the last window, per minute."""
        self._trim(self.clock())
        others = sum(1 for _, who, _ in self._recent if who != POLL)
        return others * 60.0 / self.window

    def per_minute(self) -> float:
        """What every consumer spent in the last window, per minute."""
        return self.recent() * 60.0 / self.window

    def recent(self) -> int:
        """Requests in the last window, by anyone."""
        self._trim(self.clock())
        return len(self._recent)

    def _trim(self, now: float) -> None:
        while self._recent and self._recent[0][0] <= now - self.window:
            self._recent.popleft()
