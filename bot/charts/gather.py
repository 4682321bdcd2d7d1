"""A session's chart: its data gathered, drawn off the event loop, cached.

Two sources. The bot's own polls (`progress_points`) need nothing but
Together; a session that names a W&B run (`metadata.wandb`) gets its metrics
from W&B when `WANDB_API_KEY` is set. When W&B cannot give them (unreachable, a
refused key, an unknown run, a query error, none of the metrics logged) the
chart falls back to the progress and its words say why, so the person always
gets a picture and a reason.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from datetime import timedelta

from bot.charts.cache import CacheKey, Chart, ChartCache
from bot.rendering.charts.draw import render_png
from bot.rendering.charts.metrics import metrics_chart
from bot.rendering.charts.progress import progress_chart
from bot.rendering.charts.spec import ChartSpec, Line
from bot.rendering.charts.words import NO_RUN, NO_WANDB, chart_words, nothing_logged
from bot.runtime import Runtime
from bot.store.queries.progress_points import steps_of
from bot.store.queries.watch_state import progress_now
from bot.store.tables import database_now
from bot.training.poll_progress import PollProgress
from bot.training.sessions import TrainingSession
from bot.training.status import Status
from bot.wandb.errors import WandbError
from bot.wandb.history import Series
from bot.wandb.runs import run_of

PROGRESS = "progress"
#: a progress chart's flat line grows with time: its cache entry lasts this long
PROGRESS_BUCKET_SECONDS = 300


async def chart_of(
    rt: Runtime,
    cache: ChartCache,
    session: TrainingSession,
    *,
    metrics: Sequence[str] = (),
    stall_minutes: float | None = None,
) -> Chart:
    """The chart of `session`: W&B metrics when it can (the named ones, else
    WANDB_METRICS), else (or when `metrics` is just `progress`) the progress."""
    async with rt.sessionmaker() as db:
        points = await steps_of(db, session.id)
        row = await progress_now(db, session.id)
        now = row.now if row is not None else await database_now(db)
    watch = (row.progress if row is not None else None) or PollProgress()
    if (
        watch.step is not None
        and watch.since is not None
        and (not points or points[-1][1] != watch.step)
    ):
        # the step as the watch first saw it, when no poll has seen it move yet
        points.append((watch.since, watch.step))
    last_step = (
        points[-1][1] if points else (watch.step if watch.step is not None else session.step)
    )
    names = tuple(metrics) or rt.settings.wandb_metrics
    run = run_of(session.wandb_entry)
    wants_metrics = names != (PROGRESS,)
    note = ""
    if wants_metrics and (rt.wandb is None or run is None):
        note = NO_WANDB if rt.wandb is None else NO_RUN
        wants_metrics = False
    stall_after = _stall_after(rt, stall_minutes)
    # The thread's stall threshold is part of what is drawn (a progress chart's
    # band, also when metrics fall back to it): two threads with different ones
    # never share a chart.
    key: CacheKey = (
        session.id,
        last_step,
        names if wants_metrics else (PROGRESS, note),
        0 if wants_metrics else int(time.time() // PROGRESS_BUCKET_SECONDS),
        stall_after.total_seconds() if stall_after is not None else None,
    )
    cached = cache.get(key)
    if cached is not None:
        rt.metrics.charts.labels(outcome="cached").inc()
        return cached
    spec: ChartSpec | None = None
    missing: tuple[str, ...] = ()
    cacheable = True
    if wants_metrics and rt.wandb is not None and run is not None:
        try:
            history = await rt.wandb.history(run, names)
        except WandbError as exc:
            note = exc.user_message.rstrip(".")
            cacheable = False  # W&B may answer on the next click
        else:
            lines = [_line(s) for s in history.values() if not s.empty]
            missing = tuple(name for name, s in history.items() if s.empty)
            if lines:
                spec = metrics_chart(session.name, lines)
            else:
                note = nothing_logged(run.path, names)
    if spec is None:
        missing = ()
        spec = progress_chart(
            session.name,
            points,
            now=now,
            stall_after=stall_after,
            running=session.status_enum is Status.RUNNING,
        )
    chart = await draw(rt, spec, missing=missing, note=note)
    if cacheable:
        cache.put(key, chart)
    return chart


async def draw(
    rt: Runtime, spec: ChartSpec, *, missing: tuple[str, ...] = (), note: str = ""
) -> Chart:
    """`spec` drawn in a worker thread (matplotlib is CPU work), with its words."""
    started = time.perf_counter()
    png = await asyncio.to_thread(_render_one_at_a_time, spec)
    rt.metrics.chart_render_seconds.observe(time.perf_counter() - started)
    text, alt = chart_words(spec, missing=missing, note=note)
    return Chart(png=png, title=spec.title, text=text, alt=alt, metrics=spec.xlabel == "step")


_rendering = threading.Lock()


def _render_one_at_a_time(spec: ChartSpec) -> bytes:
    """One chart drawn at a time per process: a burst of clicks queues (most are
    answered from the cache meanwhile) instead of holding several figures and
    competing for the CPU the poller needs."""
    with _rendering:
        return render_png(spec)


def _line(series: Series) -> Line:
    return Line(series.metric, series.steps, series.values)


def _stall_after(rt: Runtime, minutes: float | None) -> timedelta | None:
    value = rt.settings.stall_after_minutes if minutes is None else minutes
    return timedelta(minutes=value) if value > 0 else None
