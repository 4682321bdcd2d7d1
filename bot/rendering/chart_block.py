"""The root card's live chart: Slack's `data_visualization` block (pure).

A line chart of one series: the first watched W&B metric over its steps, or,
without a run, the step over time as the bot's polls saw it. Slack refuses a
whole message whose chart breaks one of the block's limits, so everything is
cut to them here (the strictest reading of Slack's reference: at most 6
series and 20 points; a title and axis titles of 50 characters, names and
labels of 20; every category unique, each series one finite point a category).
A workspace that refuses the block still gets the card without it
(`without_charts`), with the text sparkline the W&B line always carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from bot.rendering.blocks import MAX_BLOCKS, Message
from bot.rendering.chart_points import Point, reduce_points
from bot.rendering.text import CLEAN_TABLE, ELLIPSIS, one_line, slack_len

DATA_VISUALIZATION = "data_visualization"
MAX_TITLE = 50
MAX_AXIS_TITLE = 50
MAX_LABEL = 20
MAX_POINTS = 20
MAX_SERIES = 6
#: charts Slack allows in one message
MAX_CHARTS = 2
#: a line needs two points to be a line
MIN_POINTS = 2

_DAY = 24 * 3600.0


@dataclass(frozen=True)
class CardChart:
    """What the card charts: a metric (`x` its W&B step) or the polls' progress
    (`x` seconds since the epoch, `y` the step), oldest first."""

    kind: Literal["metric", "progress"]
    name: str
    points: tuple[Point, ...]


def plain(text: str, limit: int, *, default: str = "value") -> str:
    """A bare chart string: no control characters, one line, at most `limit`
    characters however Slack counts them (ending in "…" when cut)."""
    cleaned = one_line(text.translate(CLEAN_TABLE)) or default
    if slack_len(cleaned) <= limit:
        return cleaned
    cut = cleaned[: limit - 1]
    while cut and slack_len(cut) > limit - 1:
        cut = cut[:-1]
    return cut.rstrip() + ELLIPSIS


def unique_labels(labels: Sequence[str], limit: int = MAX_LABEL) -> list[str]:
    """The labels, each within `limit`, a repeat told apart by a number
    (`12:05·2`): Slack's categories name the points, so they must differ."""
    out: list[str] = []
    seen: set[str] = set()
    for label in labels:
        label = plain(label, limit, default="?")
        n = 1
        candidate = label
        while candidate in seen:
            n += 1
            suffix = f"·{n}"
            candidate = plain(label, limit - len(suffix), default="?") + suffix
        seen.add(candidate)
        out.append(candidate)
    return out


def step_label(step: float) -> str:
    """A W&B step as an axis label: whole steps as integers, others short."""
    if step.is_integer() and abs(step) < 1e15:
        return str(int(step))
    return f"{step:.6g}"


def time_labels(seconds: Sequence[float]) -> list[str]:
    """Poll times as axis labels (UTC), as fine as the span needs: the day
    for a chart over days, the second for one under an hour."""
    if not seconds:
        return []
    span = max(seconds) - min(seconds)
    shape = "%b %d %H:%M" if span >= _DAY else ("%H:%M" if span >= 3600 else "%H:%M:%S")
    return [_utc(s).strftime(shape) for s in seconds]


def _utc(seconds: float) -> datetime:
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):  # beyond what a datetime holds
        return datetime.fromtimestamp(0, UTC)


def chart_block(chart: CardChart) -> dict[str, Any] | None:
    """The chart as a `data_visualization` line chart; None when fewer than
    two finite points remain (nothing to draw)."""
    points = reduce_points(chart.points, MAX_POINTS)
    if len(points) < MIN_POINTS:
        return None
    if chart.kind == "metric":
        labels = unique_labels([step_label(x) for x, _ in points])
        title = f"{plain(chart.name, MAX_TITLE - 9)} by step"
        name, x_title, y_title = chart.name, "step", chart.name
    else:
        labels = unique_labels(time_labels([x for x, _ in points]))
        title, name = "Step over time (the bot's polls)", "step"
        x_title, y_title = "time (UTC)", "step"
    series_name = plain(name, MAX_LABEL)
    return {
        "type": DATA_VISUALIZATION,
        "title": plain(title, MAX_TITLE),
        "chart": {
            "type": "line",
            "series": [
                {
                    "name": series_name,
                    "data": [
                        {"label": label, "value": y}
                        for label, (_, y) in zip(labels, points, strict=True)
                    ],
                }
            ],
            "axis_config": {
                "categories": labels,
                "x_label": plain(x_title, MAX_AXIS_TITLE),
                "y_label": plain(y_title, MAX_AXIS_TITLE),
            },
        },
    }


def has_chart(blocks: Sequence[Any]) -> bool:
    return any(isinstance(b, dict) and b.get("type") == DATA_VISUALIZATION for b in blocks)


def with_chart(card: Message, block: dict[str, Any] | None) -> Message:
    """The card with the chart just before its buttons, unless there is none,
    the card is full or already carries as many charts as Slack allows."""
    if block is None:
        return card
    blocks: list[dict[str, Any]] = list(card["blocks"])
    charts = sum(1 for b in blocks if b.get("type") == DATA_VISUALIZATION)
    if len(blocks) >= MAX_BLOCKS or charts >= MAX_CHARTS:
        return card
    at = next((i for i, b in enumerate(blocks) if b.get("type") == "actions"), len(blocks))
    blocks.insert(at, block)
    return {**card, "blocks": blocks}


def without_charts(card: Message) -> Message:
    """The card as a workspace that refuses the chart block gets it."""
    blocks = [b for b in card["blocks"] if b.get("type") != DATA_VISUALIZATION]
    return {**card, "blocks": blocks}
