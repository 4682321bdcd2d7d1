"""Arithmetic on times and numbers from outside, clamped rather than raised.

Together's dates and int64 durations can hold anything (an `updated_at` of year
9999, an `inactive_timeout` of 2**63-1 seconds meaning "never", a creation time
in year 1 with an offset that carries it past what `datetime` holds). Plain
`datetime` arithmetic raises OverflowError on those, in the middle of a watch,
which would stop it for every other session too. Every sum of a time and an
outside duration, and every time zone change of an outside time, goes through
here and lands on the nearest value a datetime can hold, so a bad value affects
only the one thing that carries it. Pure.
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


def span(seconds: float) -> timedelta:
    """`seconds` as a timedelta, clamped to what one holds (NaN: none)."""
    if isinstance(seconds, float) and math.isnan(seconds):
        return timedelta(0)
    if seconds >= MAX_SECONDS:
        return timedelta.max
    if seconds <= -MAX_SECONDS:
        return timedelta.min
    return timedelta(seconds=seconds)


def later(when: datetime, by: timedelta | float) -> datetime:
    """`when` plus `by` (a timedelta, or seconds), or the earliest or latest time
    there is (in `when`'s time zone) when the sum falls outside them."""
    delta = by if isinstance(by, timedelta) else span(by)
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


def naive_utc(when: datetime | None) -> datetime | None:
    """Naive UTC, as the database's times are (see `utc`); None stays None."""
    if when is None or when.tzinfo is None:
        return when
    return utc(when).replace(tzinfo=None)


def utc_or_none(when: datetime | None) -> datetime | None:
    """Naive UTC, or None for a time with no UTC equivalent within the years a
    datetime holds: such a time says nothing of when anything happened, so a
    caller that has another time to go by uses that instead."""
    if when is None or when.tzinfo is None:
        return when
    try:
        return when.astimezone(UTC).replace(tzinfo=None)
    except (OverflowError, ValueError):
        return None
