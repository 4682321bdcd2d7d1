"""Metric rules and spend budgets, judged without I/O.

A metric rule (`reward < 0.2 for 10m`) is a small state machine per session:
the first reading that breaks the threshold starts a crossing (from when the
run logged it, when the reading says), the rule fires once the crossing has
held for its duration, and one reading back on the good side re-arms it. A reading that is missing, NaN or infinite changes nothing
(the NaN alert covers those). A budget is told at 80 % and at 100 % of its
amount, with when the spend reaches the amount at the rate it grows now. A
channel's daily budget counts the spend the bot saw accrue since local
midnight, so the day boundary is the channel's time zone, not UTC.

Kept here, below everything, so the watches that judge and the messages that
word them share one meaning of each rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Literal, TypeGuard
from zoneinfo import ZoneInfo

Op = Literal["<", "<=", ">", ">="]
OPS: tuple[Op, ...] = ("<", "<=", ">", ">=")
#: the bot's own metric, from the polls' step history (no W&B needed)
STEPS_PER_MIN = "steps_per_min"
#: the budget levels told, in percent of the amount
LEVELS: tuple[int, ...] = (80, 100)
MAX_BUDGET = 1_000_000.0
#: budgets are given in dollars (`$200`); amounts in another currency are never
#: added to or compared with them
BUDGET_CURRENCY = "USD"


def breaks(op: Op, value: float, threshold: float) -> bool:
    """Whether `value` meets the rule's condition (the bad side)."""
    if op == "<":
        return value < threshold
    if op == "<=":
        return value <= threshold
    if op == ">":
        return value > threshold
    return value >= threshold


@dataclass(frozen=True)
class RuleState:
    """One rule on one session: when the current crossing began, and whether it was told."""

    since: datetime | None = None
    fired: bool = False


@dataclass(frozen=True)
class Fire:
    """A crossing that has held long enough: told once (`since` names it)."""

    since: datetime
    held: timedelta


def judge_reading(
    state: RuleState,
    *,
    op: Op,
    threshold: float,
    value: float | None,
    now: datetime,
    hold: timedelta,
    began: datetime | None = None,
) -> tuple[RuleState, Fire | None]:
    """The rule's state after one reading, and the crossing to tell if it fires now.
    `began`: when a new crossing began, when the reading knows it (no later than
    `now`); else it begins with this reading."""
    if value is None or not math.isfinite(value):
        return state, None
    if not breaks(op, value, threshold):
        return RuleState(), None
    start = began if began is not None and began <= now else now
    since = state.since if state.since is not None and state.since <= now else start
    if state.fired:
        return RuleState(since, True), None
    if now - since >= hold:
        return RuleState(since, True), Fire(since, now - since)
    return RuleState(since, False), None


def crossing_began(
    points: Sequence[tuple[float, float]], *, op: Op, threshold: float
) -> float | None:
    """When the crossing the newest point is in began: the time of the first of
    the points that break the rule since the last one that did not (`points`:
    (time, value) in order; NaN and infinities are skipped, as readings). None
    when the newest finite point does not break it. Sampled points make this
    no earlier than the crossing's true start: the rows between two samples
    are not seen."""
    began = None
    for at, value in reversed(points):
        if not math.isfinite(value):
            continue
        if not breaks(op, value, threshold):
            break
        began = at
    return began


def budget_level(spent: float, amount: float) -> int:
    """The highest level of `LEVELS` the spend has reached (0: none)."""
    if amount <= 0 or not math.isfinite(spent):
        return 0
    reached = [level for level in LEVELS if spent >= amount * level / 100]
    return max(reached, default=0)


def reaches_at(
    spent: float,
    amount: float,
    per_hour: float | None,
    now: datetime,
    *,
    day_ends_in: str | None = None,
) -> datetime | None:
    """When the spend reaches `amount` at `per_hour`; None when it has or never will.
    `day_ends_in`: a daily budget's zone, whose count starts again at its local
    midnight, so a time after the end of `now`'s local day is never reached."""
    if per_hour is None or not per_hour > 0 or spent >= amount:
        return None
    hours = (amount - spent) / per_hour
    if hours > 24 * 365 * 10:
        return None
    at = now + timedelta(hours=hours)
    if day_ends_in is not None:
        day_end = day_start(local_day(now, day_ends_in) + timedelta(days=1), day_ends_in)
        if at >= day_end:
            return None
    return at


def local_day(now: datetime, zone: str) -> date:
    """The day `now` (naive UTC) falls on in `zone`."""
    return now.replace(tzinfo=UTC).astimezone(ZoneInfo(zone)).date()


def day_start(day: date, zone: str) -> datetime:
    """Local midnight of `day` in `zone`, as naive UTC."""
    midnight = datetime.combine(day, time(0), tzinfo=ZoneInfo(zone))
    return midnight.astimezone(UTC).replace(tzinfo=None)


def currency_code(currency: str | None) -> str:
    """A price's currency as compared: upper case, `USD` when none is named."""
    return (currency or "").strip().upper() or BUDGET_CURRENCY


def same_currency(currency: str | None) -> bool:
    """Whether an amount in `currency` may be compared with a budget (in dollars)."""
    return currency_code(currency) == BUDGET_CURRENCY


@dataclass(frozen=True)
class DailySpend:
    """A daily budget's count: the day, each session's spend when the day's count
    began for it (what it had spent before: not today's), and the newest spend
    seen of it today. A session that ended, or whose spend is not read for now,
    keeps its newest: what it spent today still counts. `currency` names the
    sessions priced in another currency than the budget's: never added to it."""

    day: date
    baseline: Mapping[str, float]
    latest: Mapping[str, float]
    currency: Mapping[str, str] = field(default_factory=dict)

    def _today(self) -> dict[str, float]:
        return {
            sid: max(self.latest.get(sid, base) - base, 0.0) for sid, base in self.baseline.items()
        }

    def spent(self) -> float:
        """Today's spend in dollars over every session the count has seen today."""
        return sum(v for sid, v in self._today().items() if sid not in self.currency)

    def others(self) -> dict[str, float]:
        """Today's spend in each other currency: named apart, never added."""
        out: dict[str, float] = {}
        for sid, value in self._today().items():
            if sid in self.currency:
                out[self.currency[sid]] = out.get(self.currency[sid], 0.0) + value
        return out

    def stored(self) -> dict[str, list[Any]]:
        """The `baseline` column: each session's `[baseline, latest]`, and its
        currency third when it is not the budget's."""
        return {
            sid: [base, self.latest.get(sid, base)]
            + ([self.currency[sid]] if sid in self.currency else [])
            for sid, base in self.baseline.items()
        }

    @classmethod
    def of_stored(cls, day: date, stored: Mapping[str, object]) -> DailySpend:
        """A count as `stored` keeps it (a bare number, as once stored, is a
        baseline whose newest is not known yet); unreadable entries are left out."""
        baseline: dict[str, float] = {}
        latest: dict[str, float] = {}
        currency: dict[str, str] = {}
        for sid, value in stored.items():
            entry = value if isinstance(value, list) else [value, value]
            numbers = [float(v) for v in entry[:2] if _finite(v)]
            code = entry[2] if len(entry) == 3 else None
            if len(numbers) != 2 or len(entry) not in (2, 3):
                continue
            if code is not None and (not isinstance(code, str) or same_currency(code)):
                continue
            baseline[sid], latest[sid] = numbers[0], numbers[1]
            if code is not None:
                currency[sid] = currency_code(code)
        return cls(day, baseline, latest, currency)


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def daily_spend(
    prev: DailySpend | None,
    costs: Mapping[str, float],
    *,
    now: datetime,
    zone: str,
    currencies: Mapping[str, str | None] | None = None,
) -> DailySpend:
    """The count after one look at `costs` (the estimates read now, each in its
    session's `currencies`, dollars when not named): a new day starts from what
    each session has spent by then; a session first seen during the day counts
    from then on; one not in `costs` keeps what it was last seen at."""
    today = local_day(now, zone)
    seen = {
        sid: currency_code(code)
        for sid, code in (currencies or {}).items()
        if sid in costs and not same_currency(code)
    }
    if prev is None or prev.day != today:
        return DailySpend(today, dict(costs), dict(costs), seen)
    baseline = dict(prev.baseline)
    for sid, cost in costs.items():
        baseline.setdefault(sid, cost)
    kept = {sid: code for sid, code in prev.currency.items() if sid not in costs}
    return DailySpend(today, baseline, {**prev.latest, **costs}, kept | seen)
