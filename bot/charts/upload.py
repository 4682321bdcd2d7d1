"""A chart into Slack: `files_upload_v2` into a thread (or the channel), with
bounded retries, and an answer people can act on when Slack refuses.

Without the `files:write` scope nothing is retried: the answer says how to add
it. A rate limit waits what Slack asks (a few seconds at most); another refusal
or a failed transfer is tried again a couple of times, then given up with the
error named. A retry may follow an upload Slack did complete but whose answer
was lost: at worst the chart shows twice, never an endless loop.
"""

from __future__ import annotations

import asyncio
import logging

from bot.charts.cache import Chart
from bot.ops.retry_after import parse_retry_after
from bot.rendering.refusals import MISSING_SCOPE, upload_busy, upload_refused
from bot.slack_web import SlackApiError, SlackClientError, SlackWeb
from bot.slack_web.refusals import UPLOAD_FINAL

log = logging.getLogger(__name__)

ATTEMPTS = 3
MAX_WAIT = 5.0


class UploadRefused(Exception):
    """Slack did not take the chart; `words` say why, for a person."""

    def __init__(self, error: str, words: str) -> None:
        super().__init__(error)
        self.error = error
        self.words = words


async def upload_chart(
    slack: SlackWeb,
    chart: Chart,
    *,
    channel: str,
    thread_ts: str | None,
    attempts: int = ATTEMPTS,
) -> None:
    """Share `chart` into `thread_ts` of `channel` (or the channel itself)."""
    error = "unknown"
    for attempt in range(attempts):
        try:
            await slack.upload(
                channel=channel,
                thread_ts=thread_ts,
                content=chart.png,
                filename=chart.filename,
                title=chart.title,
                alt_txt=chart.alt,
                initial_comment=chart.text,
            )
            return
        except SlackApiError as exc:
            error = str(exc.response.get("error") or f"HTTP {exc.response.status_code}")
            if error == "missing_scope":
                raise UploadRefused(error, MISSING_SCOPE) from exc
            if error in UPLOAD_FINAL:
                raise UploadRefused(error, upload_refused(error)) from exc
            wait = 0.5 * 2**attempt
            if exc.response.status_code == 429 or error == "ratelimited":
                wait = _retry_after(exc.response.headers) or 1.0
                if wait > MAX_WAIT:
                    raise UploadRefused(error, upload_busy(wait)) from exc
        except (SlackClientError, OSError, TimeoutError) as exc:
            error = type(exc).__name__
            wait = 0.5 * 2**attempt
        log.warning("chart upload failed (%s), attempt %d of %d", error, attempt + 1, attempts)
        if attempt + 1 < attempts:
            await asyncio.sleep(wait)
    raise UploadRefused(error, upload_refused(error))


def _retry_after(headers: object) -> float | None:
    if not isinstance(headers, dict):
        return None
    for name, value in headers.items():
        if str(name).lower() == "retry-after":
            raw = value[0] if isinstance(value, list) and value else value
            return parse_retry_after(raw)
    return None
