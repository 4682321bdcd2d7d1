"""What a failed exchange with Together means, as one `TogetherError`.

Each failure gets a `kind` the rest of the bot can act on: user wording
(`USER_MESSAGES`), poller back-off (`transient`, `retry_after`), operator alerts.
"""

from __future__ import annotations

import json
import time
from typing import Literal

import httpx

from bot.ops.retry_after import parse_retry_after

ErrorKind = Literal[
    "invalid_id", "not_found", "auth", "rate_limited", "unavailable", "bad_response"
]

USER_MESSAGES: dict[str, str] = {
    "invalid_id": "That is not a session id. Ids look like `123e4567-e89b-12d3-a456-426614174000`.",
    "not_found": "Together has no training session with that id.",
    "auth": "Together rejected the bot's API key. Your operators have been told.",
    "rate_limited": "Together is rate limiting the bot right now. Try again in a minute.",
    "unavailable": "Together is unavailable right now (it did not answer in time). Try again shortly.",
    "bad_response": "Together sent an answer the bot could not read. Try again shortly.",
}
MAX_RETRY_AFTER = 300.0


class TogetherError(Exception):
    def __init__(
        self,
        kind: ErrorKind,
        detail: str = "",
        *,
        status: int | None = None,
        retry_after: float | None = None,
        sent: bool = True,
        together_message: str = "",
    ) -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind: ErrorKind = kind
        self.detail = detail
        self.status = status
        self.retry_after = retry_after
        # False when the request never left: the bot held it back during a
        # shared pause after another request's 429. Not this session's failure.
        self.sent = sent
        # Together's own words from its error object ("" when it gave none):
        # untrusted text, shown only escaped and bounded.
        self.together_message = together_message

    @property
    def user_message(self) -> str:
        return USER_MESSAGES[self.kind]

    @property
    def transient(self) -> bool:
        return self.kind in ("rate_limited", "unavailable", "bad_response")

    @property
    def accepted(self) -> bool:
        """Together took the request (a 2xx) but its answer could not be read:
        for a stop, the stop happened."""
        return self.status is not None and 200 <= self.status < 300


def retry_after_seconds(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Honour `Retry-After` (seconds or HTTP date) or `x-ratelimit-reset` (delta or epoch).

    A value that is neither (`soon`, `nan`, `inf`, `-5`) counts as absent."""
    now = time.time() if now is None else now
    value = parse_retry_after(headers.get("retry-after"), now=now)
    if value is None:
        value = parse_retry_after(headers.get("x-ratelimit-reset"), now=now)
        if value is not None and value > 1e9:  # an epoch, not a delta
            value = max(value - now, 0.0)
    if value is None:
        return None
    return min(value, MAX_RETRY_AFTER)


def check_status(response: httpx.Response) -> None:
    """Raise the `TogetherError` an answer's HTTP status means (nothing for a 2xx)."""
    status = response.status_code
    message = _error_message(response)
    if status == 404:
        if _together_error_body(response):
            raise TogetherError("not_found", message, status=status, together_message=message)
        # A gateway's or load balancer's page (a deploy, a misroute) says nothing
        # about the session: transient, never "gone".
        raise TogetherError("unavailable", "HTTP 404 without Together's error", status=status)
    if status in (401, 403):
        raise TogetherError("auth", message, status=status, together_message=message)
    if status == 429:
        raise TogetherError(
            "rate_limited",
            message,
            status=status,
            retry_after=retry_after_seconds(response.headers),
            together_message=message,
        )
    if status >= 500 or status in (408, 409, 425):
        raise TogetherError(
            "unavailable",
            message or f"HTTP {status}",
            status=status,
            retry_after=retry_after_seconds(response.headers),
            together_message=message,
        )
    if status >= 400:
        raise TogetherError(
            "bad_response", message or f"HTTP {status}", status=status, together_message=message
        )
    if 300 <= status < 400:
        raise TogetherError("bad_response", f"unexpected redirect (HTTP {status})", status=status)


def _together_error_body(response: httpx.Response) -> bool:
    """Whether the body is Together's JSON error object, `{"error": {...}}`."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(body, dict) and isinstance(body.get("error"), dict)


def _error_message(response: httpx.Response) -> str:
    if response.status_code < 400:
        return ""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])[:300]
    return ""
