"""A daily budget's forecast stays within its day: the count starts again at
local midnight (DEFAULT_TIMEZONE), so a rate that would reach the amount only
after it is not forecast ("at $10/h", no time), and one within the day is.
Pure."""

from __future__ import annotations

from datetime import datetime

from bot.training.thresholds import reaches_at

ZONE = "America/Los_Angeles"  # local midnight is 08:00 UTC in December


def test_a_daily_forecast_past_local_midnight_is_not_given() -> None:
    now = datetime(2026, 12, 8, 7, 0)  # 23:00 on 7 Dec in Los Angeles
    # $80 of $100 at $10/h: $100 at 09:00 UTC, after the local day has ended
    assert reaches_at(80.0, 100.0, 10.0, now, day_ends_in=ZONE) is None
    # the same budget a session's, not a day's: forecast as before
    assert reaches_at(80.0, 100.0, 10.0, now) == datetime(2026, 12, 8, 9, 0)


def test_a_daily_forecast_within_the_day_is_given() -> None:
    now = datetime(2026, 12, 8, 5, 0)  # 21:00 on 7 Dec in Los Angeles
    assert reaches_at(80.0, 100.0, 10.0, now, day_ends_in=ZONE) == datetime(2026, 12, 8, 7, 0)
