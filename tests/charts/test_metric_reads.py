"""The card's W&B reads (pure parts): what a read keeps for the card, which
metrics are newly NaN or infinite (told once each), and the card's W&B line."""

from __future__ import annotations

import math

from bot.jobs.metric_reads import BadMetric, next_view
from bot.rendering.metric_alert import metric_alert
from bot.rendering.metric_lines import MetricLine, metrics_text, sparkline, with_metrics
from bot.rendering.root_card import metric_lines
from bot.store.chart_tables import SessionMetrics
from bot.training.metrics_view import MetricsView
from bot.wandb.history import Series

NAMES = ("reward", "loss")


def _series(metric: str, values: list[float]) -> Series:
    return Series(metric, tuple(float(800 + i) for i in range(len(values))), tuple(values))


def test_a_metric_gone_nan_is_found_once_with_its_step() -> None:
    recent = {
        "reward": _series("reward", [0.1, 0.2, 0.3]),
        "loss": _series("loss", [1.0, 0.9, math.nan, 0.8]),
    }
    view, bad = next_view(MetricsView(), NAMES, {"reward": 0.3, "loss": 0.8}, recent)
    assert bad == [BadMetric("loss", "NaN", 802.0)]
    assert view.told_bad == ["loss"] and view.recent["loss"][2] is None
    assert view.latest == {"reward": 0.3, "loss": 0.8} and view.last_step == 803.0
    again, bad_again = next_view(view, NAMES, {"reward": 0.3, "loss": 0.8}, recent)
    assert bad_again == [] and again.told_bad == ["loss"]  # told once


def test_an_infinite_summary_value_is_told_without_a_step() -> None:
    view, bad = next_view(MetricsView(), NAMES, {"reward": math.inf}, {})
    assert bad == [BadMetric("reward", "Infinity", None)]
    assert view.latest == {"reward": None} and view.latest_bad == {"reward": "Infinity"}


def test_the_card_line_has_values_and_a_sparkline() -> None:
    assert sparkline([0.0, 0.5, 1.0]) == "▁▅█"
    assert sparkline([1.0, None, 1.0]) == "▅ ▅"
    assert sparkline([None, math.nan]) == ""
    text = metrics_text(
        [MetricLine("reward", 0.823, (0.1, 0.5, 0.8)), MetricLine("loss", None, (), bad="NaN")]
    )
    assert text == "W&B: reward *0.823* `▁▅█` · loss *NaN*"
    card = {"text": "t", "blocks": [{"type": "section"}, {"type": "actions", "elements": []}]}
    drawn = with_metrics(card, [MetricLine("reward", 1.0)])
    assert [b["type"] for b in drawn["blocks"]] == ["section", "context", "actions"]
    assert with_metrics(card, []) is card


def test_a_sparkline_spanning_the_whole_float_range_is_drawn() -> None:
    """-1e308 to 1e308 is an infinite span: scaling must stay finite."""
    assert sparkline([-1e308, 0.0, 1e308]) == "▁▅█"
    assert sparkline([1e308, 1e308, 1.7e308]) == "▁▁█"
    assert sparkline([-1.7976931348623157e308, 1.7976931348623157e308]) == "▁█"
    line = MetricLine("loss", 1e308, (-1e308, None, 1e308))
    assert metrics_text([line]) == "W&B: loss *1.00e+308* `▁ █`"


def test_metric_lines_read_the_stored_view_tolerantly() -> None:
    stored = MetricsView(latest={"reward": 0.5}, recent={"reward": [0.1, None]}).dump()
    # as the column reads it back (`PydanticJSON`): an unreadable view is nothing read
    read = SessionMetrics.__table__.c.view.type.process_result_value
    assert metric_lines(read(stored, None), NAMES) == (MetricLine("reward", 0.5, (0.1, None)),)
    assert metric_lines(read("not a view", None), NAMES) == ()
    assert metric_lines(read({"latest": {"reward": "x"}}, None), NAMES) == ()


def test_the_alert_names_the_metric_value_and_step() -> None:
    message = metric_alert("run-1 (abc)", "loss", "NaN", 812.0)
    assert "`loss` became NaN at step 812" in message["text"]
    paged = metric_alert("run-1", "<!channel>", "Infinity", None, mention="<@U1>")
    assert "<!channel>" not in str(paged["blocks"]) and "<@U1>" in str(paged["blocks"])
