"""Times as Together sends them, made comparable with the database's (naive UTC).

Together may send any date `datetime` can parse, with any offset: the first
day of year 1 east of Greenwich, or the last of year 9999 west of it, has no
UTC equivalent `datetime` can hold, and converting it raises. Such a time says
nothing of when anything happened, so it reads as no time at all.
"""

from __future__ import annotations

from datetime import UTC, datetime


def naive_utc(when: datetime | None) -> datetime | None:
    """`when` as naive UTC (a naive time is taken as UTC already); None when it
    has no UTC equivalent within the years `datetime` holds."""
    if when is None or when.tzinfo is None:
        return when
    try:
        return when.astimezone(UTC).replace(tzinfo=None)
    except (OverflowError, ValueError):
        return None
