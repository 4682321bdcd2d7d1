"""Sending a chart row: draw the chart from the data of this moment and upload
it into the row's thread (`bot.charting`).

Upload has its own bounded retries; when Slack still refuses (no `files:write`,
a rate limit that does not end, an archived channel) the row is given up at
once with one line in the thread saying why, never retried for the delivery's
hours: a chart is a picture of a moment, and the text card keeps working.
"""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.charting.cache import shared_cache
from bot.charting.gather import PROGRESS, chart_of
from bot.charting.upload import UploadRefused, upload_chart
from bot.delivery.messages import session_of
from bot.delivery.outcome import SendResult
from bot.outbox.contract.payloads import ChartPayload
from bot.outbox.contract.rows import State
from bot.outbox.queue import OutboxMessage
from bot.runtime import Runtime

log = logging.getLogger(__name__)


async def send_chart(
    row: OutboxMessage, payload: ChartPayload, *, runtime: Runtime, slack: AsyncWebClient
) -> SendResult:
    session = session_of(payload.session, row)
    chart = await chart_of(
        runtime,
        shared_cache(),
        session,
        metrics=(PROGRESS,) if payload.reason == "stall" else (),
        stall_minutes=payload.stall_minutes,
    )
    try:
        await upload_chart(slack, chart, channel=row.channel_id, thread_ts=row.thread_ts)
    except UploadRefused as exc:
        runtime.metrics.charts.labels(outcome="failed").inc()
        await _tell(slack, row, f":warning: {exc.words}")
        return SendResult(row.id, State.DEAD, error=exc.error)
    runtime.metrics.charts.labels(outcome="uploaded").inc()
    return SendResult(row.id, State.SENT)


async def _tell(slack: AsyncWebClient, row: OutboxMessage, text: str) -> None:
    """One line in the thread instead of the chart; a failure here is only logged."""
    try:
        await slack.chat_postMessage(channel=row.channel_id, thread_ts=row.thread_ts, text=text)
    except (SlackApiError, OSError, TimeoutError) as exc:
        log.warning("could not say a chart was refused: %s", type(exc).__name__)
