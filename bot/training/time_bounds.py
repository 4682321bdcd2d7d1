"""Time arithmetic on values from outside, clamped rather than raised.

Together's dates and int64 timeouts can hold anything (a `updated_at` of year
9999, an `inactive_timeout` of 2**63-1 seconds), and Python's dates stop at year
9999: `when + delta` past that raises OverflowError in the middle of a watch,
which would stop it for every other session too. These helpers give the
nearest time a datetime can hold instead, so a bad value affects only the one
thing that carries it. Pure.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def later(when: datetime, delta: timedelta) -> datetime:
    """`when + delta`, or the last (first) datetime there is when that is past it;
    keeps `when`'s time zone."""
    try:
        return when + delta
    except OverflowError:
        edge = datetime.max if delta > timedelta(0) else datetime.min
        return edge.replace(tzinfo=when.tzinfo)


def span(seconds: float) -> timedelta:
    """`seconds` as a timedelta, clamped to the longest one there is (NaN: none)."""
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        return timedelta.max if seconds > 0 else timedelta.min
    except ValueError:  # NaN
        return timedelta(0)


def naive_utc(when: datetime | None) -> datetime | None:
    """Naive UTC, as the database's times are; a time whose UTC is past the last
    (or before the first) datetime becomes that edge."""
    if when is None or when.tzinfo is None:
        return when
    try:
        return when.astimezone(UTC).replace(tzinfo=None)
    except OverflowError:
        return datetime.max if when.year > 1 else datetime.min


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
