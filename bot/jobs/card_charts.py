"""The root card's chart, gathered beside the card's W&B reads: from the read
just made (the first of WANDB_METRICS over its steps; no request of its own),
or, for a session without a run to read, from the steps its polls saw. It is
kept reduced in `session_metrics`, which every redraw of the card reads
already, so drawing it costs a status change nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from bot.rendering.chart_points import reduce_points
from bot.store.queries.progress_points import steps_of
from bot.store.session import Db
from bot.training.metrics_view import CHART_POINTS, StoredChart
from bot.wandb.history import Series

#: a line needs two points
_MIN_POINTS = 2


def metric_chart(names: Sequence[str], recent: Mapping[str, Series]) -> StoredChart | None:
    """The first watched metric over its steps, from a read's sample; None
    when the run has fewer than two finite points of it."""
    if not names:
        return None
    series = recent.get(names[0])
    if series is None:
        return None
    points = reduce_points(series.finite(), CHART_POINTS)
    if len(points) < _MIN_POINTS:
        return None
    return StoredChart(kind="metric", name=names[0], points=points)


def progress_chart(steps: Sequence[tuple[datetime, int]]) -> StoredChart | None:
    """The step over time from the polls' points (naive times are UTC)."""
    points = reduce_points([(_seconds(at), float(step)) for at, step in steps], CHART_POINTS)
    if len(points) < _MIN_POINTS:
        return None
    return StoredChart(kind="progress", name="step", points=points)


async def stored_progress_chart(db: Db, session_id: str) -> StoredChart | None:
    return progress_chart(await steps_of(db, session_id))


def _seconds(at: datetime) -> float:
    return (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).timestamp()
