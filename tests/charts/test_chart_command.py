"""`chart <id> [metric …]` and `subscribe … chart=end|off` parsed (pure)."""

from __future__ import annotations

import pytest

from bot.commands.parser import Problem, parse
from bot.settings.charts import metric_names

SID = "123e4567-e89b-12d3-a456-426614174000"


def test_chart_with_and_without_metrics() -> None:
    assert parse(f"chart {SID}").metrics == ()
    command = parse(f"chart {SID} reward train/loss reward kl_div-2")
    assert command.verb == "chart" and command.session_id == SID
    assert command.metrics == ("reward", "train/loss", "kl_div-2")  # once each


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("chart", "needs a session id"),
        (f"chart {SID} re<ward", "is not a metric name"),
        (f"chart {SID} " + "x" * 129, "is not a metric name"),
        (f"chart {SID} a b c d e f g", "more than 6 metrics"),
    ],
)
def test_bad_chart_commands_are_usage(text: str, words: str) -> None:
    command = parse(text)
    assert command.problem is Problem.USAGE and words in command.reason


def test_chart_with_a_bad_id_is_refused_before_anything_leaves() -> None:
    assert parse("chart <!channel>").problem is Problem.INVALID_ID


def test_subscribe_chart_option() -> None:
    assert parse(f"subscribe {SID}").options.chart_on_end is None
    assert parse(f"subscribe {SID} chart=off").options.chart_on_end is False
    assert parse(f"subscribe {SID} CHART=end stall=off").options.chart_on_end is True
    bad = parse(f"subscribe {SID} chart=sometimes")
    assert bad.problem is Problem.USAGE and "chart=end" in bad.reason


def test_wandb_metrics_setting_reads_a_list() -> None:
    assert metric_names("reward, loss ,reward") == ("reward", "loss")
    assert metric_names(["a", "b"]) == ("a", "b")
    assert metric_names(None) == ()
    assert len(metric_names(",".join(f"m{i}" for i in range(10)))) == 6
