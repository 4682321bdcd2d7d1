"""The card's W&B line (pure): each watched metric's latest value and a short
text sparkline of its recent points, e.g. `reward 0.82 ▁▂▄▅▇ · loss 0.41 ▇▅▃▂▁`.

Gaps (NaN, infinite, missing) show as a blank in the sparkline and the value
as `NaN`/`∞`, so a metric gone bad is visible on the card too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.rendering.blocks import MAX_BLOCKS, Message, context_block
from bot.rendering.text import inert

BARS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 16
MAX_NAME = 40


@dataclass(frozen=True)
class MetricLine:
    """One metric as the card shows it; `latest` None: not a finite number, named by `bad`."""

    name: str
    latest: float | None
    recent: tuple[float | None, ...] = ()
    bad: str | None = None


def sparkline(values: Sequence[float | None], width: int = SPARK_WIDTH) -> str:
    """The last `width` values as bars scaled between their min and max; gaps blank.

    Scaled on halves: the span of two finite floats can overflow (-1e308 to 1e308
    is infinite), half of it never does."""
    shown = list(values)[-width:]
    finite = [v for v in shown if v is not None and math.isfinite(v)]
    if not finite:
        return ""
    low, high = min(finite) / 2, max(finite) / 2
    span = high - low
    out = []
    for v in shown:
        if v is None or not math.isfinite(v):
            out.append(" ")
        elif span == 0:
            out.append(BARS[len(BARS) // 2])
        else:
            out.append(BARS[min(len(BARS) - 1, int((v / 2 - low) / span * len(BARS)))])
    return "".join(out)


def value_words(value: float | None, bad: str | None = None) -> str:
    if value is None:
        return {"Infinity": "∞", "-Infinity": "-∞"}.get(bad or "", bad or "–")
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.2e}"
    return f"{value:.3g}"


def metrics_text(lines: Sequence[MetricLine]) -> str:
    parts = []
    for line in lines:
        spark = sparkline(line.recent)
        part = f"{inert(line.name, MAX_NAME)} *{value_words(line.latest, line.bad)}*"
        parts.append(f"{part} `{spark}`" if spark else part)
    return "W&B: " + " · ".join(parts)


def with_metrics(card: Message, lines: Sequence[MetricLine]) -> Message:
    """The card with its W&B line before its buttons, within Block Kit's limit."""
    if not lines:
        return card
    blocks: list[dict[str, Any]] = list(card["blocks"])
    if len(blocks) >= MAX_BLOCKS:
        return card
    at = next((i for i, b in enumerate(blocks) if b.get("type") == "actions"), len(blocks))
    blocks.insert(at, context_block(metrics_text(lines)))
    return {**card, "blocks": blocks}
