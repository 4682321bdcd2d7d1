"""Slack's `data_visualization` block as the Slack-shaped fake judges it.

slack_sdk (3.48) has no model of this block (its `Block.parse` skips it as
unknown), so a message carrying a chart is checked in two halves: every other
block with slack_sdk's own models, and each chart against the limits of
Slack's reference (the strictest reading: /work/shared/api/
slack-data-visualization.md). Should a later slack_sdk know the block, its
model checks the chart too.
"""

from __future__ import annotations

import math
from typing import Any

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models import blocks as sdk_blocks

DATA_VISUALIZATION = "data_visualization"
MAX_CHARTS = 2
MAX_SERIES = 6
MAX_POINTS = 20
MAX_TITLE = 50
MAX_AXIS_TITLE = 50
MAX_LABEL = 20
MAX_BLOCK_ID = 255
CHART_TYPES = ("pie", "bar", "area", "line")


def _string(value: Any, where: str, limit: int, problems: list[str]) -> str | None:
    """A required non-empty string within `limit` code points."""
    if not isinstance(value, str) or not value:
        problems.append(f"{where}: must be a non-empty string")
        return None
    if len(value) > limit:
        problems.append(f"{where}: {len(value)} characters, limit {limit}")
    return value


def _number(value: Any, where: str, problems: list[str]) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.append(f"{where}: must be a number")
        return None
    if not math.isfinite(value):
        problems.append(f"{where}: must be finite")
        return None
    return float(value)


def _pie(chart: dict[str, Any], problems: list[str]) -> None:
    segments = chart.get("segments")
    if not isinstance(segments, list) or not 1 <= len(segments) <= MAX_SERIES:
        problems.append(f"chart.segments: 1 to {MAX_SERIES} required")
        return
    for i, segment in enumerate(segments):
        where = f"chart.segments[{i}]"
        if not isinstance(segment, dict):
            problems.append(f"{where}: not an object")
            continue
        _string(segment.get("label"), f"{where}.label", MAX_LABEL, problems)
        value = _number(segment.get("value"), f"{where}.value", problems)
        if value is not None and value <= 0:
            problems.append(f"{where}.value: must be > 0")


def _axis(chart: dict[str, Any], problems: list[str]) -> list[str] | None:
    axis = chart.get("axis_config")
    if not isinstance(axis, dict):
        problems.append("chart.axis_config: required")
        return None
    for key in ("x_label", "y_label"):
        if key in axis:
            _string(axis[key], f"chart.axis_config.{key}", MAX_AXIS_TITLE, problems)
    categories = axis.get("categories")
    if not isinstance(categories, list) or not 1 <= len(categories) <= MAX_POINTS:
        problems.append(f"chart.axis_config.categories: 1 to {MAX_POINTS} required")
        return None
    labels = [
        _string(c, f"chart.axis_config.categories[{i}]", MAX_LABEL, problems)
        for i, c in enumerate(categories)
    ]
    if len(set(labels)) != len(labels):
        problems.append("chart.axis_config.categories: must be unique")
    return [label for label in labels if label is not None]


def _series(chart: dict[str, Any], problems: list[str]) -> None:
    categories = _axis(chart, problems)
    series = chart.get("series")
    if not isinstance(series, list) or not 1 <= len(series) <= MAX_SERIES:
        problems.append(f"chart.series: 1 to {MAX_SERIES} required")
        return
    names: list[str | None] = []
    for i, one in enumerate(series):
        where = f"chart.series[{i}]"
        if not isinstance(one, dict):
            problems.append(f"{where}: not an object")
            continue
        names.append(_string(one.get("name"), f"{where}.name", MAX_LABEL, problems))
        data = one.get("data")
        if not isinstance(data, list) or not 1 <= len(data) <= MAX_POINTS:
            problems.append(f"{where}.data: 1 to {MAX_POINTS} points required")
            continue
        labels = []
        for j, point in enumerate(data):
            at = f"{where}.data[{j}]"
            if not isinstance(point, dict):
                problems.append(f"{at}: not an object")
                continue
            labels.append(_string(point.get("label"), f"{at}.label", MAX_LABEL, problems))
            _number(point.get("value"), f"{at}.value", problems)
        if categories is not None and labels != categories:
            problems.append(f"{where}.data: one point per category, in the categories' order")
    if len(set(names)) != len(names):
        problems.append("chart.series: names must be unique")


def chart_problems(block: dict[str, Any]) -> list[str]:
    """What a `data_visualization` block breaks of Slack's documented rules."""
    problems: list[str] = []
    if block.get("type") != DATA_VISUALIZATION:
        return [f"type: {block.get('type')!r} is not {DATA_VISUALIZATION}"]
    if "block_id" in block:
        _string(block["block_id"], "block_id", MAX_BLOCK_ID, problems)
    _string(block.get("title"), "title", MAX_TITLE, problems)
    chart = block.get("chart")
    if not isinstance(chart, dict) or chart.get("type") not in CHART_TYPES:
        return [*problems, f"chart: must be one of {', '.join(CHART_TYPES)}"]
    if chart["type"] == "pie":
        _pie(chart, problems)
    else:
        _series(chart, problems)
    known = getattr(sdk_blocks, "DataVisualizationBlock", None)
    if known is not None:  # a slack_sdk that models the block has its say too
        problems += _sdk_problems(block, "chart")
    return problems


def _sdk_problems(block: dict[str, Any], where: str) -> list[str]:
    parsed = sdk_blocks.Block.parse(block)
    if parsed is None:
        return [f"{where}: slack_sdk does not know a {block.get('type')!r} block"]
    try:
        parsed.validate_json()
    except SlackObjectFormationError as exc:
        return [f"{where}: {exc}"]
    if parsed.to_dict() != block:
        return [f"{where}: slack_sdk reads it differently: {parsed.to_dict()}"]
    return []


def blocks_problems(blocks: list[Any]) -> list[str]:
    """A message's blocks as Slack would judge them when one is a chart: each
    chart by the documented limits (at most two), the rest by slack_sdk."""
    problems: list[str] = []
    charts = 0
    for i, block in enumerate(blocks):
        if not isinstance(block, dict):
            problems.append(f"blocks[{i}]: not an object")
        elif block.get("type") == DATA_VISUALIZATION:
            charts += 1
            problems += [f"blocks[{i}].{p}" for p in chart_problems(block)]
        else:
            problems += _sdk_problems(block, f"blocks[{i}]")
    if charts > MAX_CHARTS:
        problems.append(f"{charts} charts, at most {MAX_CHARTS} a message")
    return problems


def has_chart(blocks: list[Any]) -> bool:
    return any(isinstance(b, dict) and b.get("type") == DATA_VISUALIZATION for b in blocks)
