"""W&B's sampled history and summary, read into series of numbers (pure).

W&B's rows are loose: `_step` may come as a float or be missing, a metric may be
missing from a row, non-finite values come as the strings "NaN", "Infinity" and
"-Infinity" (they are the numbers they name and are kept: a chart shows them as
gaps and the bad-metric watch tells them), and a metric logged as text gives
other strings (skipped, and counted). Nothing here raises on odd input.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

#: points a series keeps (W&B samples to this already; an odd server may not)
MAX_POINTS = 1000
#: rows looked at per series, whatever a server sends
MAX_ROWS = 200_000
_NAMED = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


@dataclass(frozen=True)
class Series:
    """One metric over steps: finite or not, in step order, at most MAX_POINTS."""

    metric: str
    steps: tuple[float, ...]
    values: tuple[float, ...]
    #: rows whose value was not a number (text, objects) or whose step was unusable
    skipped: int = 0
    #: when each point was logged (W&B's `_timestamp`, Unix seconds), one per step
    #: when every point had one, else empty
    times: tuple[float, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.steps

    def first_bad(self) -> tuple[float, float] | None:
        """The first (step, value) that is NaN or infinite, if any."""
        for step, value in zip(self.steps, self.values, strict=True):
            if not math.isfinite(value):
                return step, value
        return None

    def finite(self) -> list[tuple[float, float]]:
        return [(s, v) for s, v in zip(self.steps, self.values, strict=True) if math.isfinite(v)]


def number(value: Any) -> float | None:
    """A value W&B sent as a number, or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an int beyond a float's range
            return math.inf if value > 0 else -math.inf
    if isinstance(value, str):
        return _NAMED.get(value.strip())
    return None


def series_of(metric: str, rows: Any) -> Series:
    """One spec's rows as a series of `metric` against `_step` (with `_timestamp`
    when every row kept has a finite one)."""
    points: dict[float, tuple[float, float | None]] = {}
    skipped = 0
    for row in _rows(rows):
        step = number(row.get("_step"))
        if metric not in row:
            continue
        value = number(row.get(metric))
        if step is None or not math.isfinite(step) or value is None:
            skipped += 1
            continue
        logged = number(row.get("_timestamp"))
        points[step] = (value, logged if logged is not None and math.isfinite(logged) else None)
    ordered = sorted(points.items())
    if len(ordered) > MAX_POINTS:
        ordered = thin(ordered, MAX_POINTS)
    times = [t for _, (_, t) in ordered if t is not None]
    return Series(
        metric,
        tuple(s for s, _ in ordered),
        tuple(v for _, (v, _) in ordered),
        skipped=skipped,
        times=tuple(times) if len(times) == len(ordered) else (),
    )


def history_of(metrics: Sequence[str], sampled: Any) -> dict[str, Series]:
    """`sampledHistory` (one list of rows per spec, in the order of `metrics`) read."""
    lists = sampled if isinstance(sampled, list) else []
    out: dict[str, Series] = {}
    for i, metric in enumerate(metrics):
        out[metric] = series_of(metric, lists[i] if i < len(lists) else [])
    return out


def summary_of(metrics: Iterable[str], text: Any) -> dict[str, float]:
    """The latest value of each metric from `summaryMetrics` (a JSON string that may
    hold bare NaN or Infinity); metrics that are not numbers there are left out."""
    if isinstance(text, str):
        try:
            data = json.loads(text[: 4 << 20])
        except (ValueError, RecursionError):  # also nested too deep to read
            return {}
    else:
        data = text
    if not isinstance(data, dict):
        return {}
    out: dict[str, float] = {}
    for metric in metrics:
        value = number(data.get(metric))
        if value is not None:
            out[metric] = value
    return out


def thin(points: Sequence[T], limit: int) -> list[T]:
    """At most `limit` of `points`, evenly spread, the first and the last kept."""
    if len(points) <= limit:
        return list(points)
    if limit <= 1:
        return [points[-1]]
    stride = (len(points) - 1) / (limit - 1)
    return [points[round(i * stride)] for i in range(limit)]


def _rows(rows: Any) -> Iterable[dict[str, Any]]:
    if not isinstance(rows, list):
        return
    for row in rows[:MAX_ROWS]:
        if isinstance(row, dict):
            yield row
