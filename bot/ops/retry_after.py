"""Reading `Retry-After` the same way for Together and for Slack.

A header is untrusted input: `soon`, `nan`, `inf` or `-5` must never reach a
sleep or a `timedelta`. Only a finite, non-negative number of seconds or an
HTTP date counts; anything else is treated as if the header were absent.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import re
import time
from datetime import UTC

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

_SECONDS = re.compile(r"\d+(?:\.\d+)?")
# A header longer than this is junk, not a date or a delay.
_MAX_HEADER = 64


def parse_retry_after(raw: object, *, now: float | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` value, or None when it is not one.

    Seconds must be plain digits (an optional fraction); a date in the past
    means "now" (0). Callers apply their own upper bound."""
    if not isinstance(raw, str | int | float) or isinstance(raw, bool):
        return None
    text = str(raw).strip()
    if not text or len(text) > _MAX_HEADER:
        return None
    if _SECONDS.fullmatch(text):
        seconds = float(text)
        return seconds if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    try:
        delta = when.timestamp() - (time.time() if now is None else now)
    except (OverflowError, OSError, ValueError):
        return None
    return max(delta, 0.0) if math.isfinite(delta) else None


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
