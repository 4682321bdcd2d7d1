"""Reading `Retry-After` the same way for Together and for Slack.

A header is untrusted input: `soon`, `nan`, `inf` or `-5` must never reach a
sleep or a `timedelta`. Only a finite, non-negative number of seconds or an
HTTP date counts; anything else is treated as if the header were absent.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from datetime import UTC

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
