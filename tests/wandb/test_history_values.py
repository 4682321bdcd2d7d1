"""Odd values from W&B read as numbers, gaps or skipped rows (pure)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from bot.wandb.history import MAX_POINTS, history_of, number, series_of, summary_of, thin


def test_named_non_finite_values_are_numbers_and_text_is_not() -> None:
    assert math.isnan(number("NaN") or 0.0)
    assert number("Infinity") == math.inf and number("-Infinity") == -math.inf
    assert number("done") is None and number(True) is None and number(None) is None
    assert number(10**400) == math.inf


def test_float_and_missing_steps() -> None:
    rows = [{"_step": 1.0, "m": 1}, {"m": 2}, {"_step": "x", "m": 3}, {"_step": 2, "m": "NaN"}]
    series = series_of("m", rows)
    assert series.steps == (1.0, 2.0) and series.skipped == 2
    assert series.first_bad() is not None and series.first_bad()[0] == 2.0  # type: ignore[index]


def test_a_million_rows_become_at_most_a_thousand_points() -> None:
    rows = [{"_step": i, "m": float(i)} for i in range(1_000_000)]
    series = series_of("m", rows)
    assert len(series.steps) == MAX_POINTS
    assert series.steps[0] == 0.0


def test_history_of_odd_shapes() -> None:
    assert history_of(["a", "b"], None)["b"].empty
    assert history_of(["a"], [["not a row", {"_step": 1, "a": 2}]])["a"].values == (2.0,)


def test_summary_with_bare_nan_tokens() -> None:
    found = summary_of(["loss", "reward", "text"], '{"loss": NaN, "reward": 1.5, "text": "x"}')
    assert math.isnan(found["loss"]) and found["reward"] == 1.5 and "text" not in found
    assert summary_of(["loss"], "{not json") == {}
    assert summary_of(["loss"], None) == {}


@given(st.lists(st.integers(), max_size=3000), st.integers(min_value=1, max_value=1200))
def test_thin_keeps_ends_and_bound(points: list[int], limit: int) -> None:
    kept = thin(points, limit)
    assert len(kept) <= max(limit, 0) or len(points) <= limit
    if points and limit > 1:
        assert kept[0] == points[0] and kept[-1] == points[-1]


def test_a_series_keeps_when_its_points_were_logged_only_when_all_were() -> None:
    timed = series_of(
        "reward",
        [
            {"_step": 2, "_timestamp": 1002.5, "reward": 0.2},
            {"_step": 1, "_timestamp": 1001.0, "reward": 0.1},
        ],
    )
    assert timed.steps == (1.0, 2.0) and timed.times == (1001.0, 1002.5)
    partly = series_of(
        "reward",
        [{"_step": 1, "_timestamp": 1001.0, "reward": 0.1}, {"_step": 2, "reward": 0.2}],
    )
    assert partly.times == () and partly.values == (0.1, 0.2)
    odd = series_of("reward", [{"_step": 1, "_timestamp": "NaN", "reward": 0.1}])
    assert odd.times == ()
