"""The root card's live chart (pure): the reduction to Slack's few points
keeps the shape, and the block stays inside every documented limit whatever
the run logged (checked by the Slack-shaped fake's validator, which also runs
the card's other blocks through slack_sdk's models)."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.jobs.card_charts import metric_chart, progress_chart
from bot.rendering.card import card
from bot.rendering.chart_block import (
    MAX_LABEL,
    MAX_POINTS,
    CardChart,
    chart_block,
    has_chart,
    plain,
    step_label,
    time_labels,
    unique_labels,
    with_chart,
    without_charts,
)
from bot.rendering.chart_points import MIN_LIMIT, reduce_points
from bot.rendering.root_card import CardExtras, card_chart, card_with_extras
from bot.rendering.text import slack_len
from bot.simulated.slack_charts import blocks_problems, chart_problems
from bot.training.metrics_view import MetricsView, StoredChart
from bot.training.poll_progress import CardView
from bot.training.sessions import TrainingSession
from bot.wandb.history import Series

floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)
points = st.lists(st.tuples(finite, floats), max_size=300)
limits = st.integers(min_value=MIN_LIMIT, max_value=40)


@given(points, limits)
def test_a_reduction_keeps_first_last_lowest_and_highest_in_order(
    given_points: list[tuple[float, float]], limit: int
) -> None:
    out = reduce_points(given_points, limit)
    drawable = [(x, y) for x, y in given_points if math.isfinite(y)]
    assert len(out) == min(limit, len(drawable))
    assert all(math.isfinite(y) for _, y in out)
    # a subsequence: the points come back in their order
    it = iter(drawable)
    assert all(any(p == q for q in it) for p in out)
    if drawable:
        assert out[0] == drawable[0] and out[-1] == drawable[-1]
        assert min(y for _, y in out) == min(y for _, y in drawable)
        assert max(y for _, y in out) == max(y for _, y in drawable)


def test_a_reduction_spreads_the_rest_evenly_and_needs_room_for_four() -> None:
    line = [(float(i), float(i % 7)) for i in range(100)]
    out = reduce_points(line, 10)
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(out)]
    assert len(out) == 10 and max(gaps) <= 15  # 100 points in 10: none crowded at one end
    assert reduce_points(line[:3], 10) == line[:3]
    with pytest.raises(ValueError):
        reduce_points(line, MIN_LIMIT - 1)


texts = st.text(max_size=80)


@given(st.lists(texts, max_size=40))
def test_labels_come_back_unique_within_the_limit(labels: list[str]) -> None:
    out = unique_labels(labels)
    assert len(out) == len(labels) and len(set(out)) == len(out)
    assert all(0 < slack_len(label) <= MAX_LABEL and label.strip() for label in out)


@given(texts, st.integers(min_value=2, max_value=60))
def test_plain_strings_are_one_line_within_the_limit(text: str, limit: int) -> None:
    out = plain(text, limit)
    assert 0 < slack_len(out) <= limit and "\n" not in out


@given(
    st.sampled_from(["metric", "progress"]),
    texts,
    st.lists(st.tuples(finite, floats), max_size=200),
)
def test_every_chart_block_is_inside_slacks_limits(
    kind: str, name: str, given_points: list[tuple[float, float]]
) -> None:
    if kind == "progress":  # x: seconds since the epoch
        given_points = [(abs(x) % 4e9, y) for x, y in given_points]
    block = chart_block(CardChart(kind, name, tuple(given_points)))  # type: ignore[arg-type]
    drawable = [p for p in given_points if math.isfinite(p[1])]
    if len(drawable) < 2:
        assert block is None
        return
    assert block is not None
    assert chart_problems(block) == []
    assert len(block["chart"]["series"][0]["data"]) == min(MAX_POINTS, len(drawable))


def test_a_metric_chart_names_the_metric_and_labels_steps() -> None:
    chart = CardChart("metric", "reward", tuple((float(s), s / 100) for s in range(0, 900, 9)))
    block = chart_block(chart)
    assert block is not None and chart_problems(block) == []
    assert block["title"] == "reward by step"
    line = block["chart"]
    assert line["type"] == "line" and line["series"][0]["name"] == "reward"
    assert line["axis_config"]["categories"][0] == "0"
    assert line["axis_config"]["categories"][-1] == "891"
    assert line["series"][0]["data"][-1] == {"label": "891", "value": 8.91}
    assert chart_block(CardChart("metric", "reward", ((1.0, 2.0),))) is None


def test_labels_of_steps_and_times() -> None:
    assert step_label(812.0) == "812" and step_label(0.5) == "0.5"
    assert slack_len(step_label(1e300)) <= MAX_LABEL
    day = datetime(2026, 12, 3, 14, 5, 9, tzinfo=UTC).timestamp()
    assert time_labels([day, day + 30]) == ["14:05:09", "14:05:39"]
    assert time_labels([day, day + 7200]) == ["14:05", "16:05"]
    assert time_labels([day, day + 2 * 86400]) == ["Dec 03 14:05", "Dec 05 14:05"]


def _session() -> TrainingSession:
    return TrainingSession.model_validate(
        {"id": "sess-0123456789", "status": "RUNNING", "step": 40, "name": "grpo"}
    )


def test_the_card_carries_the_chart_before_its_buttons_and_validates() -> None:
    stored = MetricsView(
        chart=StoredChart(kind="metric", name="reward", points=[(0.0, 0.1), (10.0, 0.4)])
    )
    watch = CardExtras(CardView(), chart=card_chart(stored))
    drawn = card_with_extras(card(_session(), subscribed=True), watch, now=datetime.now(UTC))
    kinds = [b["type"] for b in drawn["blocks"]]
    assert kinds.index("data_visualization") == kinds.index("actions") - 1
    assert blocks_problems(drawn["blocks"]) == []  # the rest by slack_sdk's models
    plain_card = without_charts(drawn)
    assert not has_chart(plain_card["blocks"]) and len(plain_card["blocks"]) == len(kinds) - 1
    assert card_chart(MetricsView.model_validate({"chart": {"kind": "nope"}})) is None
    assert card_chart(MetricsView()) is None


def test_a_card_never_carries_more_charts_than_slack_allows() -> None:
    block = chart_block(CardChart("metric", "loss", ((0.0, 1.0), (1.0, 0.5))))
    drawn = {"text": "t", "blocks": [{"type": "section"}]}
    for _ in range(3):
        drawn = with_chart(drawn, block)
    assert sum(1 for b in drawn["blocks"] if b["type"] == "data_visualization") == 2
    assert with_chart(drawn, None) is drawn


def test_a_stored_chart_that_does_not_read_leaves_the_rest_of_the_view() -> None:
    view = MetricsView.model_validate(
        {"latest": {"reward": 0.5}, "chart": {"kind": "metric", "points": 3}}
    )
    assert view.latest == {"reward": 0.5} and view.chart is None
    too_many = {"kind": "metric", "name": "r", "points": [[i, i] for i in range(21)]}
    assert MetricsView.model_validate({"chart": too_many}).chart is None


def test_the_job_keeps_the_first_metric_reduced_or_the_polls_steps() -> None:
    steps = tuple(float(s) for s in range(100))
    values = tuple(math.nan if s == 50 else s / 10 for s in range(100))
    recent = {"reward": Series("reward", steps, values), "loss": Series("loss", (), ())}
    chart = metric_chart(("reward", "loss"), recent)
    assert chart is not None and chart.kind == "metric" and len(chart.points) == 20
    assert chart.points[0] == (0.0, 0.0) and chart.points[-1] == (99.0, 9.9)
    assert metric_chart(("loss", "reward"), recent) is None  # the first metric only
    assert metric_chart((), recent) is None
    start = datetime(2026, 12, 3, 14, 0)
    polls = [(start.replace(minute=m), 10 * m) for m in range(30)]
    progress = progress_chart(polls)
    assert progress is not None and progress.kind == "progress" and len(progress.points) == 20
    assert progress.points[0] == (start.replace(tzinfo=UTC).timestamp(), 0.0)
    assert progress_chart(polls[:1]) is None
