"""The progress chart (pure): the step each poll saw, steps per minute, and the
stretch where the step stood still past the stall threshold, if it did.

Needs nothing but the bot's own polls. x is minutes since the first point; the
step line is carried flat to `now`, so a stall shows as the flat line it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from itertools import pairwise

from bot.rendering.charts.spec import Band, ChartSpec, Line, Panel


def progress_chart(
    name: str,
    points: Sequence[tuple[datetime, int]],
    *,
    now: datetime,
    stall_after: timedelta | None = None,
    running: bool = True,
    target: int | None = None,
) -> ChartSpec:
    """`points` are (seen at, step), oldest first, naive UTC like `now`."""
    if not points:
        return ChartSpec(f"{name}: progress", "minutes", (), note="No step seen yet.")
    start = points[0][0]

    def minutes(when: datetime) -> float:
        return (when - start).total_seconds() / 60.0

    xs = [minutes(t) for t, _ in points]
    steps = [float(s) for _, s in points]
    last_at, last_step = points[-1]
    if running and now > last_at:
        xs.append(minutes(now))
        steps.append(float(last_step))
    rates_x: list[float] = []
    rates: list[float] = []
    for (t0, s0), (t1, s1) in pairwise(points):
        span = (t1 - t0).total_seconds() / 60.0
        if span > 0:
            rates_x.append(minutes(t1))
            rates.append((s1 - s0) / span)
    bands: tuple[Band, ...] = ()
    still = now - last_at
    if running and stall_after is not None and still >= stall_after:
        rates_x += [minutes(last_at), minutes(now)]  # standing still: no steps a minute
        rates += [0.0, 0.0]
        bands = (
            Band(
                minutes(last_at),
                minutes(now),
                f"no progress for {_duration(still)} (threshold {_duration(stall_after)})",
            ),
        )
    panels = [
        Panel(
            "step",
            (Line("step", tuple(xs), tuple(steps)),),
            hline=(float(target), f"target {target:,}") if target is not None else None,
        )
    ]
    if rates:
        panels.append(Panel("steps / min", (Line("steps/min", tuple(rates_x), tuple(rates)),)))
    return ChartSpec(
        f"{name}: progress",
        f"minutes since {start:%Y-%m-%d %H:%M} UTC",
        tuple(panels),
        bands=bands,
        note="From the bot's own polls of Together.",
    )


def _duration(span: timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"
