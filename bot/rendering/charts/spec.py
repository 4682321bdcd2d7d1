"""What a chart shows, as plain data (pure): panels of series over one shared x
axis. Built by `bot.rendering.charts.progress` and `bot.rendering.charts.metrics`, drawn by
`bot.rendering.charts.draw`, put in words by `bot.rendering.charts.words` (the message and alt text).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Line:
    """One series: x and y of equal length; NaN and infinite y are gaps."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]

    def finite(self) -> list[tuple[float, float]]:
        return [(a, b) for a, b in zip(self.x, self.y, strict=True) if math.isfinite(b)]


@dataclass(frozen=True)
class Band:
    """A stretch of x to shade, e.g. where the step stood still past the threshold."""

    start: float
    end: float
    label: str


@dataclass(frozen=True)
class Panel:
    """One axis: one metric (one line), or a few lines of one quantity."""

    ylabel: str
    lines: tuple[Line, ...]
    #: a horizontal reference line (y, label), e.g. a target step
    hline: tuple[float, str] | None = None


@dataclass(frozen=True)
class ChartSpec:
    title: str
    xlabel: str
    panels: tuple[Panel, ...]
    bands: tuple[Band, ...] = ()
    #: shown under the title: the source and what was left out
    note: str = ""
    #: which series each panel draws, for the words that go with the chart
    series: tuple[Line, ...] = field(default=())

    @property
    def lines(self) -> tuple[Line, ...]:
        return tuple(line for panel in self.panels for line in panel.lines)

    @property
    def empty(self) -> bool:
        return not any(line.finite() for line in self.lines)

    def x_range(self) -> tuple[float, float] | None:
        xs = [x for line in self.lines for x, _ in line.finite()]
        return (min(xs), max(xs)) if xs else None
