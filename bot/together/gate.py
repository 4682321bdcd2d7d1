"""The request budget's gate: every Together request passes it before it is sent.

A person's request (a command, a button, what delivery looks up) is never held:
it is counted, and booked in the deployment's books with the next heartbeat.
Any other asks its tier's share first (`bot.together.shares`): the books are
the database's (`together_grants`), read and written under one lock in one
short transaction, so the replicas never grant the same share twice. Concurrent
requests of one tier share one reservation. A request with no share waits until
the window frees one, in line with the other replicas' waiting on the same tier
(a periodic read waits longer, and `/metrics` says so);
the spend watch's reads inside the poll cycle are refused at once instead
(`BudgetRefused`), so the cycle never waits on them.

The books keep the budget over a quarter of its window (`SLICES`): a quarter of
the budget in any rolling quarter of a minute, so no rolling minute holds more
than the budget and no tier that spent its floor waits more than a quarter of a
minute for more. A grant is used at once: tokens not sent within
`GRANT_SECONDS` are dropped, and the books count a slice `GRANT_SECONDS` longer,
so a request always falls in the slice its grant was counted in.

When the books cannot be read (the database away), a request goes unchecked
and is counted as such: the budget never stops the loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from bot.together.errors import TogetherError
from bot.together.shares import REFUSED_NOT_WAITING, Shares, Tier, tier_of

log = logging.getLogger(__name__)

#: a grant's tokens are sent within this long, or dropped
GRANT_SECONDS = 0.5
#: the budget is kept in each quarter of its window, so a tier that spent its floor
#: early in a minute waits at most a quarter of one for more (a minute holds four)
SLICES = 4


@dataclass(frozen=True)
class Booked:
    """What the books answered: granted, every tier's spend before, when to ask again."""

    granted: int
    spent: Mapping[str, int]
    retry_in: float


#: (tier, decide(spent by tier, the tiers asking all along for a window) -> how many
#: to grant, whether a refused caller will wait: its place in line) -> what the books
#: answered
Decide = Callable[[Mapping[str, int], frozenset[str]], int]
Reserve = Callable[[str, Decide, bool], Awaitable[Booked]]
#: (consumer, what happened: "wait" / "refused" / "unchecked", seconds waited)
Observe = Callable[[str, str, float], None]


class BudgetRefused(TogetherError):
    """A read with no share of the budget now, refused before it was sent."""

    def __init__(self, consumer: str) -> None:
        super().__init__("rate_limited", f"no budget share for {consumer} now", sent=False)


@dataclass
class _Tokens:
    n: int = 0
    until: float = 0.0
    waiting: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Gate:
    """This replica's side of the budget: its tokens, its people's count, and the
    last view of the books (for the poller's interval)."""

    def __init__(
        self,
        shares: Shares,
        reserve: Reserve | None = None,
        *,
        window: float = 60.0,
        observe: Observe | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.shares = shares
        #: the seconds the books count `shares.budget` over
        self.window = window
        self._reserve = reserve
        self._observe = observe
        self._clock = clock
        self._tokens: dict[Tier, _Tokens] = {}
        #: people's requests not booked yet (`unbooked`)
        self.people = 0
        #: what each tier spent in the window, as the books last said
        self.spent: dict[Tier, int] = {}
        #: what the poll's round costs a window at the shortest interval (set by the
        #: poller): the tiers below it leave that much of the free part to it
        self.poll_need = 0.0
        # set when the replica stops: nobody waits for a share any more
        self._closed = asyncio.Event()

    def close(self) -> None:
        """The replica stops: a request waiting for a share is refused now, so its
        job ends rather than hold the shutdown."""
        self._closed.set()

    @property
    def on(self) -> bool:
        return self._reserve is not None and self.shares.budget > 0

    def unbooked(self) -> int:
        """People's requests since the last call, to book now."""
        n, self.people = self.people, 0
        return n

    def poll_per_minute(self) -> float:
        """What the poll may spend a minute, the others as the books last said."""
        return self.shares.poll_capacity(self.spent) * 60.0 / self.window

    def need_poll(self, round_cost: float, min_interval: float) -> None:
        """The poll's round costs `round_cost`: what it needs a window at the
        shortest interval is kept from the tiers below it."""
        self.poll_need = round_cost * self.window / max(min_interval, 1e-3)

    async def take(self, consumer: str) -> None:
        """Let one request of `consumer` go: at once for people, when its tier has
        a share for the others (waiting for one), or `BudgetRefused`."""
        tier = tier_of(consumer)
        if tier is Tier.PEOPLE or not self.on:
            self.people += 1
            return
        tokens = self._tokens.setdefault(tier, _Tokens())
        if self._spend_token(tokens):
            return
        refuse = consumer in REFUSED_NOT_WAITING
        if refuse and tokens.lock.locked():  # the tier is already waiting: no share now
            self._note(consumer, "refused", 0.0)
            raise BudgetRefused(consumer)
        started, refused_once = self._clock(), False
        tokens.waiting += 1
        try:
            async with tokens.lock:
                while not self._spend_token(tokens):
                    booked = await self._book(tier, tokens.waiting, waits=not refuse)
                    if booked is None:  # the books are away: unchecked
                        self._note(consumer, "unchecked", 0.0)
                        return
                    if booked.granted:
                        tokens.n, tokens.until = booked.granted, self._clock() + GRANT_SECONDS
                        continue
                    if refuse:
                        self._note(consumer, "refused", 0.0)
                        raise BudgetRefused(consumer)
                    refused_once = True
                    if await _closed_within(self._closed, booked.retry_in):
                        raise BudgetRefused(consumer)
        finally:
            tokens.waiting -= 1
        if refused_once:  # it had no share when it asked: it waited for one
            self._note(consumer, "wait", self._clock() - started)

    def _spend_token(self, tokens: _Tokens) -> bool:
        if tokens.n > 0 and self._clock() < tokens.until:
            tokens.n -= 1
            return True
        tokens.n = 0
        return False

    async def _book(self, tier: Tier, want: int, *, waits: bool = False) -> Booked | None:
        assert self._reserve is not None

        def decide(spent: Mapping[str, int], steady: frozenset[str]) -> int:
            by_tier = _by_tier(spent)
            allowed = self.shares.allowance(
                tier,
                by_tier,
                poll_need=self.poll_need,
                steady=frozenset(_by_tier(dict.fromkeys(steady, 0))),
            )
            return want if allowed is None else min(want, allowed)

        try:
            booked = await self._reserve(tier.value, decide, waits)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("the request budget's books could not be read (%s): sent unchecked", exc)
            return None
        self.spent = _by_tier(booked.spent)
        if booked.granted:
            self.spent[tier] = self.spent.get(tier, 0) + booked.granted
        return booked

    async def book_people(self) -> None:
        """Book the people's requests sent since the last call, and read the books
        (`spent`, for the poller's interval): the heartbeat's part."""
        if not self.on:
            self.people = 0
            return
        n = self.unbooked()
        if await self._book(Tier.PEOPLE, n) is None:
            self.people += n  # booked with the next heartbeat

    def _note(self, consumer: str, what: str, seconds: float) -> None:
        if self._observe is not None:
            self._observe(consumer, what, seconds)


async def _closed_within(closed: asyncio.Event, seconds: float) -> bool:
    try:
        await asyncio.wait_for(closed.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True


def _by_tier(spent: Mapping[str, int]) -> dict[Tier, int]:
    out: dict[Tier, int] = {}
    for name, n in spent.items():
        try:
            out[Tier(name)] = out.get(Tier(name), 0) + n
        except ValueError:
            continue
    return out
