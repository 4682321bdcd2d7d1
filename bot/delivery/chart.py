"""Sending a chart row: draw the chart from the data of this moment and upload
it into the row's thread (`bot.charts`).

A chart takes seconds (the first one imports matplotlib), so it is drawn and
uploaded beside the delivery pass, not in it: the row is marked sent when the
work is handed over, and the pass goes on to other channels' messages at once.
A chart is a picture of a moment, so it is sent at most once: a crash while it
is drawn loses it rather than repeating it. Upload has its own bounded retries;
when Slack still refuses (no `files:write`, a rate limit that does not end, an
archived channel) the thread gets one line saying why.
"""

from __future__ import annotations

import asyncio
import logging

from bot.charts.cache import shared_cache
from bot.charts.gather import PROGRESS, chart_of
from bot.charts.upload import UploadRefused, upload_chart
from bot.delivery.messages import session_of
from bot.delivery.outcome import SendResult
from bot.outbox.contract.payloads import ChartPayload
from bot.outbox.contract.rows import State
from bot.outbox.table import OutboxMessage
from bot.runtime import Runtime
from bot.slack_web import SlackApiError, SlackWeb
from bot.training.thresholds import STEPS_PER_MIN

log = logging.getLogger(__name__)

#: charts being drawn or uploaded (kept so the tasks are not collected meanwhile)
_pending: set[asyncio.Task[None]] = set()


async def send_chart(
    row: OutboxMessage, payload: ChartPayload, *, runtime: Runtime, slack: SlackWeb
) -> SendResult:
    """Hand the chart to a task of its own; the row is done."""
    task = asyncio.create_task(_draw_and_upload(row, payload, runtime=runtime, slack=slack))
    _pending.add(task)
    task.add_done_callback(_pending.discard)
    return SendResult(row.id, State.SENT)


async def _draw_and_upload(
    row: OutboxMessage, payload: ChartPayload, *, runtime: Runtime, slack: SlackWeb
) -> None:
    extra = {"outbox_id": row.id, "channel_id": row.channel_id, "session_id": row.session_id}
    try:
        chart = await chart_of(
            runtime,
            shared_cache(),
            session_of(payload.session, row),
            metrics=_metrics(payload),
            stall_minutes=payload.stall_minutes,
        )
        await upload_chart(slack, chart, channel=row.channel_id, thread_ts=row.thread_ts)
    except UploadRefused as exc:
        runtime.metrics.charts.labels(outcome="failed").inc()
        log.warning("chart upload refused: %s", exc.error, extra=extra)
        await _tell(slack, row, f":warning: {exc.words}")
    except Exception:
        runtime.metrics.charts.labels(outcome="failed").inc()
        log.exception("could not draw or upload a chart", extra=extra)
    else:
        runtime.metrics.charts.labels(outcome="uploaded").inc()


def _metrics(payload: ChartPayload) -> tuple[str, ...]:
    """A stall's chart is the progress chart; a rule's, its metric (`steps_per_min`:
    progress); the end's, WANDB_METRICS."""
    if payload.reason == "stall":
        return (PROGRESS,)
    if payload.reason == "rule":
        return tuple(PROGRESS if m == STEPS_PER_MIN else m for m in payload.metrics)
    return ()


async def _tell(slack: SlackWeb, row: OutboxMessage, text: str) -> None:
    """One line in the thread instead of the chart; a failure here is only logged."""
    try:
        await slack.post(channel=row.channel_id, thread_ts=row.thread_ts, text=text)
    except (SlackApiError, OSError, TimeoutError) as exc:
        log.warning("could not say a chart was refused: %s", type(exc).__name__)
