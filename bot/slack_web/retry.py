"""Slack's 429s retried by the SDK's own client, waiting what Slack asks, read safely.

The built-in handler does `int(header)`: `nan` raises out of the API call and
`86400` sleeps a day. Here the header is read by `parse_retry_after`.
"""

from __future__ import annotations

import asyncio
import random

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from bot.ops.retry_after import parse_retry_after


class SlackRateLimitRetry(AsyncRetryHandler):
    """slack_sdk's 429 retry, reading `Retry-After` with `parse_retry_after`.

    The built-in handler does `int(header)`: `nan` raises out of the API call
    and `86400` sleeps a day. Here an unreadable value waits about a second and
    a long one at most `max_wait` seconds."""

    def __init__(self, max_retry_count: int = 1, *, max_wait: float = 60.0) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.max_wait = max_wait

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return response is not None and response.status_code == 429

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        raw = None
        for name, values in (response.headers if response is not None else {}).items():
            if name.lower() == "retry-after" and values:
                raw = values[0]
        seconds = parse_retry_after(raw)
        delay = min(seconds, self.max_wait) if seconds is not None else 1.0
        state.next_attempt_requested = True
        await asyncio.sleep(delay + random.random())
        state.increment_current_attempt()
