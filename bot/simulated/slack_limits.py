"""Slack's rate limits on the two calls the bot makes most, as `FakeSlack` applies them.

Slack answers a call past its limit with HTTP 429, `{"ok": false, "error":
"ratelimited"}` and a `Retry-After` header in whole seconds. Two limits matter
to a bot that tells many threads at once:

- `chat.update` is a Tier 3 method: about 50 calls in any rolling minute per
  workspace (here: per bot token, one workspace's).
- `chat.postMessage` allows a short burst in one channel, then about one
  message a second there.

Only calls Slack took count against a limit: a refused call costs nothing but
the wait. Everything is judged on the monotonic clock of the fake's process.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field

__all__ = ["SlackLimits"]


@dataclass
class _Bucket:
    """One channel's posting allowance: `tokens` left, refilled over time."""

    tokens: float
    at: float


@dataclass
class SlackLimits:
    """The limits and what was taken under them; thread-safe.

    `enabled` False takes every call (a test about something else)."""

    enabled: bool = True
    #: `chat.update` calls a workspace may make in any rolling 60 s
    updates_per_minute: int = 50
    #: `chat.postMessage` calls one channel may make at once, before the steady rate
    post_burst: int = 5
    #: `chat.postMessage` calls a second one channel may make after its burst
    posts_per_second: float = 1.0
    _updates: dict[str, deque[float]] = field(default_factory=dict)
    _posts: dict[str, _Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        """Forget what was taken (the limits and `enabled` stay)."""
        with self._lock:
            self._updates.clear()
            self._posts.clear()

    def take(self, method: str, *, workspace: str, channel: str | None) -> int | None:
        """Take one call of `method`; None when it is allowed, else the seconds
        Slack would ask the caller to wait (`Retry-After`, at least 1)."""
        if not self.enabled:
            return None
        now = time.monotonic()
        with self._lock:
            if method == "chat.update":
                return self._take_update(workspace, now)
            if method == "chat.postMessage" and channel:
                return self._take_post(channel, now)
        return None

    def _take_update(self, workspace: str, now: float) -> int | None:
        taken = self._updates.setdefault(workspace, deque())
        while taken and taken[0] <= now - 60.0:
            taken.popleft()
        if len(taken) >= self.updates_per_minute:
            return max(1, math.ceil(taken[0] + 60.0 - now))
        taken.append(now)
        return None

    def _take_post(self, channel: str, now: float) -> int | None:
        bucket = self._posts.get(channel)
        if bucket is None:
            bucket = self._posts[channel] = _Bucket(tokens=float(self.post_burst), at=now)
        bucket.tokens = min(
            float(self.post_burst), bucket.tokens + (now - bucket.at) * self.posts_per_second
        )
        bucket.at = now
        if bucket.tokens < 1.0:
            return max(1, math.ceil((1.0 - bucket.tokens) / self.posts_per_second))
        bucket.tokens -= 1.0
        return None
