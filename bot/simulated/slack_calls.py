"""What `FakeSlack` records and how a test reads it: each Web API call as a
`SlackCall`, each response_url POST as a `ResponseAttempt`, the faults a test
queues (`SlackFault`), and the queries and waits over them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._http import WAIT_SECONDS, FakeHTTPServer, Headers

__all__ = [
    "APP_ID",
    "BOT_ID",
    "BOT_USER_ID",
    "TEAM_ID",
    "ResponseAttempt",
    "SlackCall",
    "SlackCallLog",
    "SlackFault",
]

BOT_USER_ID = "UBOT"
BOT_ID = "B1"
TEAM_ID = "T1"
APP_ID = "A1"

_TRUE = (True, 1, "1", "true", "True", "TRUE")


@dataclass
class SlackCall:
    """One Web API call. `ok`/`error`/`status` say how the fake answered it."""

    method: str
    params: dict[str, Any]
    headers: Headers
    at: float
    ok: bool = True
    error: str | None = None
    status: int = 200
    response: dict[str, Any] | None = None

    @property
    def token(self) -> str | None:
        auth = self.headers.get("authorization")
        if isinstance(auth, str) and auth.lower().startswith("bearer "):
            return auth[7:].strip()
        token = self.params.get("token")
        return token if isinstance(token, str) else None

    @property
    def channel(self) -> str | None:
        value = self.params.get("channel")
        return value if isinstance(value, str) else None

    @property
    def text(self) -> str | None:
        value = self.params.get("text")
        return value if isinstance(value, str) else None

    @property
    def thread_ts(self) -> str | None:
        value = self.params.get("thread_ts")
        return str(value) if value not in (None, "") else None

    @property
    def ts(self) -> str | None:
        """`ts` sent (chat.update) or assigned (chat.postMessage)."""
        if self.response and isinstance(self.response.get("ts"), str):
            return str(self.response["ts"])
        value = self.params.get("ts")
        return str(value) if value not in (None, "") else None

    @property
    def blocks(self) -> list[Any] | None:
        return _as_json_list(self.params.get("blocks"))

    @property
    def metadata(self) -> dict[str, Any] | None:
        return _as_json_dict(self.params.get("metadata"))


@dataclass
class SlackFault:
    """A scripted failure queued with `fail_next`."""

    status: int = 200
    error: Any = None
    retry_after: int | None = None
    remaining: int = 1
    #: only calls whose params satisfy this take the fault (None: any call)
    when: Callable[[dict[str, Any]], bool] | None = None
    #: answer this JSON body verbatim instead of `{"ok": false, "error": ...}`
    body: dict[str, Any] | None = None
    #: carry the call out first (the post is stored), then answer with the fault
    after: bool = False


@dataclass
class ResponseAttempt:
    """A POST to a response_url, delivered (200) or refused (404 once expired)."""

    token: str
    body: Any
    status: int
    at: float = field(default_factory=time.monotonic)


def _as_json_dict(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str) and value.strip():
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _as_json_list(value: Any) -> list[Any] | None:
    if isinstance(value, str) and value.strip():
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, list) else None


class SlackCallLog(FakeHTTPServer):
    """The queries and waits over the calls and response_url POSTs `FakeSlack` recorded."""

    calls: list[SlackCall]
    responses: dict[str, list[dict[str, Any]]]

    def calls_to(self, method: str) -> list[SlackCall]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def successful(self, method: str) -> list[SlackCall]:
        with self._lock:
            return [c for c in self.calls if c.method == method and c.ok]

    def successful_posts(self, channel: str | None = None) -> list[SlackCall]:
        with self._lock:
            return [
                c
                for c in self.calls
                if c.method == "chat.postMessage" and c.ok and channel in (None, c.channel)
            ]

    def posts_in_thread(self, channel: str, thread_ts: str) -> list[SlackCall]:
        """Successful chat.postMessage calls into that thread, in arrival order."""
        return [c for c in self.successful_posts(channel) if c.thread_ts == thread_ts]

    def updates(self, channel: str | None = None, ts: str | None = None) -> list[SlackCall]:
        """Successful chat.update calls, optionally for one channel / message."""
        with self._lock:
            return [
                c
                for c in self.calls
                if c.method == "chat.update"
                and c.ok
                and channel in (None, c.channel)
                and ts in (None, c.ts)
            ]

    def wait_for_response(self, token: str, timeout: float = WAIT_SECONDS) -> dict[str, Any]:
        """Block until something was POSTed to `response_url(token)`; return the first body."""
        return self.wait_for(
            lambda s: s.responses.get(token, [None])[0],
            timeout,
            message=f"no response_url POST for token {token!r}",
        )

    async def wait_for_response_async(
        self,
        token: str,
        timeout: float = WAIT_SECONDS,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        return await self.wait_for_async(
            lambda s: s.responses.get(token, [None])[0],
            timeout,
            message=f"no response_url POST for token {token!r}",
        )

    def wait_for_calls(
        self, method: str, count: int = 1, timeout: float = WAIT_SECONDS, *, ok: bool | None = True
    ) -> list[SlackCall]:
        """Block until at least `count` calls to `method` (only successful ones by default)."""
        return self.wait_for(
            self._calls_predicate(method, count, ok), timeout, message=f"{count}x {method}"
        )

    async def wait_for_calls_async(
        self,
        method: str,
        count: int = 1,
        timeout: float = WAIT_SECONDS,  # noqa: ASYNC109
        *,
        ok: bool | None = True,
    ) -> list[SlackCall]:
        return await self.wait_for_async(
            self._calls_predicate(method, count, ok), timeout, message=f"{count}x {method}"
        )

    @staticmethod
    def _calls_predicate(
        method: str, count: int, ok: bool | None
    ) -> Callable[[SlackCallLog], list[SlackCall] | None]:
        def predicate(fake: SlackCallLog) -> list[SlackCall] | None:
            found = [c for c in fake.calls_to(method) if ok is None or c.ok == ok]
            return found if len(found) >= count else None

        return predicate
