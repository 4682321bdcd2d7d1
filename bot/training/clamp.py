"""Arithmetic on times and numbers that come from outside, clamped instead of raising.

Together's dates and durations are its own: a timeout of int64 max meaning
"never", a creation time in the year 1 or 9999 with an offset that carries it
past what `datetime` holds. Plain `datetime` arithmetic raises OverflowError on
those, and one such value in a poll must not stop the loop: every sum of a time
and an outside duration, and every time zone change of an outside time, goes
through here and lands on the nearest time `datetime` can hold.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

#: the longest duration `timedelta` holds, in seconds
MAX_SECONDS = timedelta.max.total_seconds()


def clamp(value: float, low: float, high: float) -> float:
    """`value` within [low, high]; NaN is `low`."""
    if value != value:  # NaN
        return low
    return min(max(value, low), high)


def duration(seconds: float | int) -> timedelta:
    """`seconds` as a timedelta, clamped to what one holds (NaN: none)."""
    if isinstance(seconds, float) and math.isnan(seconds):
        return timedelta(0)
    if seconds >= MAX_SECONDS:
        return timedelta.max
    if seconds <= -MAX_SECONDS:
        return timedelta.min
    return timedelta(seconds=seconds)


def shifted(when: datetime, by: timedelta | float | int) -> datetime:
    """`when` plus `by` (a timedelta, or seconds), or the earliest or latest time
    there is (in `when`'s time zone) when the sum falls outside them."""
    delta = by if isinstance(by, timedelta) else duration(by)
    try:
        return when + delta
    except OverflowError:
        edge = datetime.max if delta > timedelta(0) else datetime.min
        return edge.replace(tzinfo=when.tzinfo)


def utc(when: datetime) -> datetime:
    """An aware time in UTC (a naive one is taken to be UTC already), or the
    earliest or latest UTC time there is when the change of zone falls outside them."""
    if when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    try:
        return when.astimezone(UTC)
    except OverflowError:
        edge = datetime.min if when.year == datetime.min.year else datetime.max
        return edge.replace(tzinfo=UTC)


def naive_utc(when: datetime) -> datetime:
    """Naive UTC, as the database's times are (see `utc`)."""
    return utc(when).replace(tzinfo=None)
