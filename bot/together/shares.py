"""The request budget's shares: who may send how many Together requests now.

`TOGETHER_REQUESTS_PER_MINUTE` is the whole deployment's. It is split into
tiers, in priority order: people (commands, buttons, and what delivery looks
up for them), the poll (subscribed sessions' status, and the spend watch's reads
in its cycle), the org-wide error watch, follow discovery, and the idle watches. Each tier these
settings run has a floor, a share of the budget kept for it whatever the
others do; what no floor holds is free, and goes to the tiers above first.
A tier below the poll that neither spent nor asked in the window holds no
floor (the poll may use it): its ask is in the books, so the others give its
floor back within a window, and it takes its floor once that is wholly free.

Pure: what each tier spent in the window in, how many it may still send out.
The rules (`allowance`) keep one invariant, which `tests/together/test_budget_properties.py`
holds them to against a model of Together with every watch on and several
replicas:

- the periodic tiers together never spend more than the budget less the
  people's floor in any window, so no window exceeds the budget unless people
  alone asked for more than their floor (they are never refused; what they
  take beyond it the periodic tiers give back first, from the free part);
- a periodic tier that spent in the window or has asked all along for one
  (the poll: always) is never refused within its floor, and one tier never
  takes another's floor; a waking tier takes its floor once it is wholly free,
  and is steady a window after its first ask: a job with work, waking or not,
  waits at most a window of the books (`bot.together.gate`: a quarter of a
  minute) and a retry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from bot.settings.model import Settings


class Tier(StrEnum):
    """The budget's tiers, highest priority first."""

    PEOPLE = "people"
    POLL = "poll"
    ERRORS = "errors"
    FOLLOW = "follow"
    IDLE = "idle"


#: what each consumer (a job's name, `bot.jobs.table`) is charged to; any other is
#: a person's (never refused)
TIER_OF: Mapping[str, Tier] = {
    "poll": Tier.POLL,
    "watch_errors": Tier.ERRORS,
    "follow": Tier.FOLLOW,
    "watch_idle": Tier.IDLE,
    "watch_subscribed_idle": Tier.IDLE,
    # the spend watch's reads are the poll cycle's own (a card's resource line and
    # spend): charged to the poll, never behind the idle watch's line, where a busy
    # budget left them no share for minutes
    "spend": Tier.POLL,
}
#: consumers that read in the middle of another job's work (the spend watch's reads
#: in the poll cycle): with no share now they are refused at once, never made to wait
REFUSED_NOT_WAITING = frozenset({"spend"})
#: the floors of the tiers other than the poll, as shares of the budget (the poll's is
#: POLL_BUDGET_SHARE, less whatever these need)
FLOOR_SHARES: Mapping[Tier, float] = {
    Tier.PEOPLE: 0.10,
    Tier.ERRORS: 0.10,
    Tier.FOLLOW: 0.10,
    Tier.IDLE: 0.10,
}
#: tiers that hold their floor only while they ask: one that neither spent nor
#: asked in the window (absent from the books' `spent`) leaves it to the others
QUIET_WITHOUT_WORK = frozenset({Tier.ERRORS, Tier.FOLLOW, Tier.IDLE})


def tier_of(consumer: str) -> Tier:
    return TIER_OF.get(consumer, Tier.PEOPLE)


def running_tiers(settings: Settings) -> frozenset[Tier]:
    """The tiers these settings run (a floor is kept only for those)."""
    tiers = {Tier.PEOPLE, Tier.POLL, Tier.FOLLOW}
    if settings.watch_all_errors:
        tiers.add(Tier.ERRORS)
    if (
        settings.spend_watch
        or settings.watch_idle_resources
        or settings.idle_resource_alert_minutes > 0
    ):
        tiers.add(Tier.IDLE)
    return frozenset(tiers)


@dataclass(frozen=True)
class Shares:
    """The budget of one window (`budget` requests) and the floors of its tiers."""

    budget: int
    floors: Mapping[Tier, int]

    @classmethod
    def of(cls, budget: float, tiers: frozenset[Tier], *, poll_share: float = 0.5) -> Shares:
        """Floors for `tiers` out of `budget` requests a window: each tier but the
        poll its share of the budget (at least one request), the poll
        `poll_share` of it, or what the others left if that is less."""
        total = max(0, math.floor(budget))
        floors: dict[Tier, int] = {
            t: max(1, math.floor(FLOOR_SHARES[t] * total))
            for t in tiers
            if t is not Tier.POLL and t in FLOOR_SHARES
        }
        if sum(floors.values()) > total:  # a budget too small for every floor: one each
            floors = dict.fromkeys(floors, 0)
        left = total - sum(floors.values())
        floors[Tier.POLL] = min(left, math.floor(poll_share * total))
        return cls(budget=total, floors=floors)

    @property
    def free(self) -> int:
        return self.budget - sum(self.floors.values())

    def floor(self, tier: Tier) -> int:
        return self.floors.get(tier, 0)

    def _held(self, tier: Tier, spent: Mapping[Tier, int], poll_need: float) -> float:
        """What `tier` holds of the window: its spend, or its floor if more, unless it
        is quiet (and the poll, for the tiers below it, what its round needs at the
        shortest interval)."""
        if tier in QUIET_WITHOUT_WORK and tier not in spent:
            return 0.0
        held = float(max(self.floor(tier), spent.get(tier, 0)))
        if tier is Tier.POLL:
            held = max(held, min(poll_need, self.budget - self._floors_but(Tier.POLL)))
        return held

    def _floors_but(self, tier: Tier) -> int:
        return sum(n for t, n in self.floors.items() if t is not tier)

    def allowance(
        self,
        tier: Tier,
        spent: Mapping[Tier, int],
        *,
        poll_need: float = 0.0,
        steady: frozenset[Tier] = frozenset(),
    ) -> int | None:
        """How many more requests `tier` may send in this window, after what every
        tier `spent` in it (a tier there with 0 asked; absent, it is quiet; None:
        any number, for people). Within its floor, always, if it spent in the
        window or has been asking all along for one (`steady`; the poll:
        always); one that did neither takes nothing until its floor is wholly
        free, people counted at their floor. Beyond, what is left
        once every other tier holds its floor or its spend, and, for the tiers
        below the poll, what the poll's round needs."""
        if tier is Tier.PEOPLE:
            return None
        own = spent.get(tier, 0)
        others = sum(
            self._held(t, spent, poll_need if tier is not Tier.POLL else 0.0)
            for t in {*self.floors, *spent}
            if t is not tier
        )
        beyond = math.floor(self.budget - others - own)
        floor = self.floor(tier) - own
        if tier in QUIET_WITHOUT_WORK and own <= 0 and tier not in steady:
            periodic = sum(
                self._held(t, spent, 0.0)
                for t in {*self.floors, *spent}
                if t is not tier and t is not Tier.PEOPLE
            )
            if self.budget - self.floor(Tier.PEOPLE) - periodic < floor:
                return 0  # what it took would make its floor its own before it is free
        return max(0, floor, beyond)

    def poll_capacity(self, spent: Mapping[Tier, int]) -> int:
        """What the poll may spend a window at the most, the others as they are:
        the budget less every other tier's floor or spend, whichever is more."""
        others = sum(
            self._held(t, spent, 0.0) for t in {*self.floors, *spent} if t is not Tier.POLL
        )
        return max(self.floor(Tier.POLL), math.floor(self.budget - others))
