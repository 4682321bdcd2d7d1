"""The metrics chart (pure): one W&B metric per axis, x = step shared by all."""

from __future__ import annotations

from collections.abc import Sequence

from bot.rendering.charts.spec import ChartSpec, Line, Panel


def metrics_chart(name: str, lines: Sequence[Line], *, note: str = "") -> ChartSpec:
    """`lines` are each metric against `_step`; metrics with no points keep no axis
    (the words that go with the chart say so)."""
    drawn = tuple(Panel(line.label, (line,)) for line in lines if line.x)
    return ChartSpec(f"{name}: metrics", "step", drawn, note=note or "From the session's W&B run.")
