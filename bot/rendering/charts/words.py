"""What a chart shows, in words (pure): the session's name, the step range and
each series' first and last value. The message beside the image and its alt
text, so the chart says the same to someone who cannot see it; and the note
that says why the bot's own progress is shown instead of W&B metrics."""

from __future__ import annotations

import math

from bot.rendering.charts.spec import ChartSpec, Line
from bot.rendering.text import defuse, escape

MAX_ALT = 1000


def number(value: float) -> str:
    """A value short and exact enough to read: 3 significant digits, big ones grouped."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def series_words(line: Line) -> str:
    if not line.y:
        return f"{line.label}: no points"
    first, last = line.y[0], line.y[-1]
    return f"{line.label} {number(first)} → {number(last)}"


def describe(spec: ChartSpec, *, missing: tuple[str, ...] = ()) -> str:
    """One line: title, x range and each series' first → last value."""
    parts = [spec.title]
    span = spec.x_range()
    if span is not None:
        sep = " " if spec.xlabel == "step" else ": "
        parts.append(f"{spec.xlabel}{sep}{number(span[0])}–{number(span[1])}")
    parts += [series_words(line) for line in spec.lines]
    parts += [f"{name}: never logged" for name in missing]
    if spec.bands:
        parts.append(spec.bands[0].label)
    text = "; ".join(parts)
    return text if len(text) <= MAX_ALT else text[: MAX_ALT - 1] + "…"


#: W&B metrics were asked for, but there is no W&B client
NO_WANDB = "W&B is not set up for this bot (your operator can add a W&B API key)"
#: W&B metrics were asked for, but the session's metadata names no run
NO_RUN = "this session names no W&B run (`metadata.wandb`)"


def nothing_logged(run_path: str, names: tuple[str, ...]) -> str:
    """The run has none of the metrics asked for (a note: escaped where it is shown)."""
    return f"W&B run {run_path} has no {', '.join(names)} logged"


def chart_words(
    spec: ChartSpec, *, missing: tuple[str, ...] = (), note: str = ""
) -> tuple[str, str]:
    """The message beside a chart (mrkdwn) and its alt text (plain): the same
    facts, with `note` saying why the bot's own progress is shown instead."""
    words = describe(spec, missing=missing)
    if note:
        words += f" ({note}; showing the bot's own progress)"
    # A file's comment is autolinked like a `text` fallback: escaped and defused
    # as every other text from Together and W&B, so a name neither pings nor links.
    return f":bar_chart: {defuse(escape(words))}", words
