"""The card's W&B reads: each watched session's run read at most once every
`WANDB_REFRESH_SECONDS` (one request for all its metrics: `summaryMetrics` and
the recent points), kept in `session_metrics` for the card's next redraw; a
metric that became NaN or infinite is told once in the session's threads (and
on-call with `ONCALL_ON_METRIC`). The card's chart is kept there too, from the
same read, or, for a session without a run (or without W&B), from the steps
its polls saw (`card_charts`).
on-call with `ONCALL_ON_METRIC`). A session watched with no thread yet (only a
person's App Home switch) has nobody to tell: its bad metric is not marked told,
so a thread added later hears it at the next read.

One replica at a time (a job lock), a bounded batch per tick, and the W&B
budget honoured: a spent budget ends the pass, and the sessions left wait for
the next one. A read that fails, for any reason, is kept as that card's reason,
never raised (the pass goes on to the other sessions), and the next read of that
session waits longer after each failure in a row (`next_read_at`; the count is in
the stored view, so every replica backs off alike).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.alerts.metric_rules import Reading, judge_rules
from bot.jobs.card_charts import metric_chart, stored_progress_chart
from bot.outbox.contract.payloads import MetricPayload
from bot.outbox.contract.rows import OutboxRow, Thread, metric_rows
from bot.outbox.queue import insert_outbox
from bot.runtime import Runtime
from bot.store.job_locks import claim_job, release_job, renewing
from bot.store.queries.audience import session_threads
from bot.store.queries.metric_rules import metrics_by_session, rules_reaching
from bot.store.queries.session_metrics import due_sessions, view_of, write_view
from bot.store.queries.watch_state import snapshots
from bot.store.session import Db
from bot.store.tables import database_now
from bot.training.metrics_view import SPARK_POINTS, MetricsView, bad_name, finite_or_none
from bot.training.snapshots import SessionSnapshot
from bot.training.thresholds import STEPS_PER_MIN
from bot.training.time_bounds import later
from bot.wandb.errors import USER_MESSAGES, WandbError
from bot.wandb.history import Series
from bot.wandb.runs import run_of

log = logging.getLogger(__name__)

JOB = "read_wandb"
BATCH = 20
#: the longest a session whose reads keep failing waits for its next read (or
#: WANDB_REFRESH_SECONDS, when that is longer)
RETRY_MOST = timedelta(hours=1)
UNREADABLE = USER_MESSAGES["bad_response"]


@dataclass(frozen=True)
class BadMetric:
    metric: str
    value: str
    step: float | None


def next_view(
    old: MetricsView,
    names: Sequence[str],
    latest: Mapping[str, float],
    recent: Mapping[str, Series],
) -> tuple[MetricsView, list[BadMetric]]:
    """The view after a read, and the metrics newly gone NaN or infinite (pure)."""
    bad: list[BadMetric] = []
    told = list(old.told_bad)
    for name in names:
        if name in told:
            continue
        series = recent.get(name)
        first = series.first_bad() if series is not None else None
        value = latest.get(name)
        if first is not None:
            bad.append(BadMetric(name, bad_name(first[1]), first[0]))
        elif value is not None and not math.isfinite(value):
            bad.append(BadMetric(name, bad_name(value), None))  # the summary only: no step
    told += [b.metric for b in bad if b.metric not in told]
    steps = [s.steps[-1] for s in recent.values() if s.steps]
    view = MetricsView(
        latest={n: finite_or_none(latest[n]) for n in names if n in latest},
        latest_bad={
            n: bad_name(latest[n]) for n in names if n in latest and not math.isfinite(latest[n])
        },
        recent={
            n: [finite_or_none(v) for v in recent[n].values[-SPARK_POINTS:]]
            for n in names
            if n in recent and not recent[n].empty
        },
        last_step=max(steps) if steps else None,
        told_bad=told,
    )
    return view, bad


def next_read_at(now: datetime, *, failures: int, refresh: timedelta) -> datetime:
    """The `read_at` written after a read. A session is read again once `read_at`
    is `refresh` old: after a read that worked that is `now`; after `failures`
    failed reads in a row it is set later, so the next read waits
    `refresh * 2**failures` (at most RETRY_MOST, or `refresh` when longer). Pure."""
    if failures <= 0:
        return now
    wait = min(refresh * 2 ** min(failures, 10), max(RETRY_MOST, refresh))
    return later(now, wait - refresh)


def rule_readings(
    metrics: set[str],
    latest: Mapping[str, float],
    recent: Mapping[str, Series],
    *,
    floor: datetime | None = None,
) -> dict[str, Reading]:
    """What a read says of the rules' W&B metrics (pure): each one's latest
    value (None when the run has none) at its newest sampled step, with the
    points as the run logged them (when W&B timed them) and `floor`, when the
    session was read before, so a crossing is timed from when it was logged."""
    out: dict[str, Reading] = {}
    for name in metrics - {STEPS_PER_MIN}:
        series = recent.get(name)
        step = series.steps[-1] if series is not None and series.steps else None
        points: tuple[tuple[float, float], ...] = ()
        if series is not None and len(series.times) == len(series.values):
            points = tuple(zip(series.times, series.values, strict=True))
        out[name] = Reading(latest.get(name), step, points=points, floor=floor)
    return out


async def read_metrics(rt: Runtime) -> int:
    """One pass; how many metrics it found newly gone NaN or infinite."""
    wandb, settings = rt.wandb, rt.settings
    async with rt.sessionmaker() as db:
        # Nothing due (most passes): nothing to claim, and no write.
        now = await database_now(db)
        before = now - timedelta(seconds=settings.wandb_refresh_seconds)
        if not await due_sessions(db, before=before, limit=1):
            return 0
    async with rt.sessionmaker() as db, db.begin():
        job = await claim_job(db, JOB, owner=rt.owner, lease_seconds=settings.lease_seconds)
        if job is None:
            return 0
        now = await database_now(db)
        due = await due_sessions(
            db, before=now - timedelta(seconds=settings.wandb_refresh_seconds), limit=BATCH
        )
        # the channels' rules ride on the same request: their metrics are asked for too
        wanted = metrics_by_session(await rules_reaching(db, due))
        stored = await snapshots(db, due)
    read = told = 0
    refresh = timedelta(seconds=settings.wandb_refresh_seconds)
    readings: dict[str, dict[str, Reading]] = {}
    try:
        async with renewing(
            rt.sessionmaker, JOB, owner=rt.owner, lease_seconds=settings.lease_seconds
        ):
            for session_id in due:
                bad: list[BadMetric] = []
                extra = sorted(wanted.get(session_id, set()) - {STEPS_PER_MIN})
                snapshot = stored.get(session_id)
                run = run_of(snapshot.wandb_entry if snapshot is not None else None)
                async with rt.sessionmaker() as db:
                    old, last_read = await view_of(db, session_id)
                    charted = run is not None and wandb is not None
                    chart = None if charted else await stored_progress_chart(db, session_id)
                if run is None or wandb is None:
                    # nothing to read; looked at again after the refresh
                    view = old.model_copy(update={"chart": chart})
                else:
                    try:
                        names = [*settings.wandb_metrics]
                        names += [m for m in extra if m not in names]
                        latest, recent = await wandb.card(run, names)
                    except WandbError as exc:
                        if exc.kind == "budget":
                            break
                        failures = old.failures + 1
                        log.info("could not read a W&B run: %s (%d in a row)", exc.kind, failures)
                        view = old.model_copy(
                            update={"error": exc.user_message, "failures": failures}
                        )
                    except Exception:
                        # One run's answer that breaks the reading is that session's
                        # error; the pass goes on to the others.
                        log.exception("could not read a W&B run", extra={"session_id": session_id})
                        view = old.model_copy(
                            update={"error": UNREADABLE, "failures": old.failures + 1}
                        )
                    else:
                        view, bad = next_view(old, settings.wandb_metrics, latest, recent)
                        chart = metric_chart(settings.wandb_metrics, recent)
                        view = view.model_copy(update={"chart": chart})
                        if session_id in wanted:
                            readings[session_id] = rule_readings(
                                wanted[session_id], latest, recent, floor=last_read
                            )
                        read += 1
                async with rt.sessionmaker() as db, db.begin():
                    threads = await _threads(db, session_id) if bad else []
                    if bad and not threads:
                        view = untold(view, bad)
                    read_at = next_read_at(now, failures=view.failures, refresh=refresh)
                    await write_view(db, session_id, view, read_at=read_at)
                    if threads:
                        await _tell(db, rt, threads, snapshot, bad)
                        told += len(bad)
            # the channels' rules on what this pass read: one judgement for the batch
            if readings:
                async with rt.sessionmaker() as db, db.begin():
                    await judge_rules(
                        db,
                        readings,
                        now=now,
                        oncall_channel=settings.oncall_channel,
                        snapshots=stored,
                    )
    finally:
        async with rt.sessionmaker() as db, db.begin():
            await release_job(db, JOB, owner=rt.owner)
    if read:
        log.info("read %d sessions' W&B runs; %d metrics newly NaN or infinite", read, told)
    return told


def untold(view: MetricsView, bad: Sequence[BadMetric]) -> MetricsView:
    """The view with these metrics not marked told (nobody heard them). Pure."""
    names = {b.metric for b in bad}
    return view.model_copy(update={"told_bad": [m for m in view.told_bad if m not in names]})


async def _threads(db: Db, session_id: str) -> list[Thread]:
    """The session's active threads, the first subscribed first."""
    subs = await session_threads(db, session_id)
    return [Thread(s.id, session_id, s.channel_id, s.root_ts) for s in subs]


async def _tell(
    db: Db,
    rt: Runtime,
    threads: list[Thread],
    snapshot: SessionSnapshot | None,
    bad: list[BadMetric],
) -> None:
    """Each metric newly gone bad, once in each of the session's active threads."""
    oncall = rt.settings.oncall_channel if rt.settings.oncall_on_metric else None
    rows: list[OutboxRow] = []
    for item in bad:
        payload = MetricPayload(
            metric=item.metric,
            value=item.value,
            step=item.step,
            session=snapshot,
        )
        rows += metric_rows(payload, threads=threads, oncall_channel=oncall)
    await insert_outbox(db, rows)
