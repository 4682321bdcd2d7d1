"""`FakeSlack`: a Slack-Web-API-shaped HTTP server on 127.0.0.1, plus response_url endpoints.

Point slack-sdk at it with `AsyncWebClient(base_url=fake.api_url, token="xoxb-test")`; methods
arrive as `POST /api/<method>` (JSON or form body) or `GET /api/<method>?…` and every call is
recorded as a `SlackCall`. Messages posted with `chat.postMessage` are stored per channel so
`conversations.replies` / `conversations.history` return them (with their metadata).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from ._http import FakeHTTPServer, Request, Response, parse_body
from .slack_calls import (
    APP_ID,
    BOT_ID,
    BOT_USER_ID,
    TEAM_ID,
    ResponseAttempt,
    SlackCall,
    SlackCallLog,
    SlackFault,
)
from .slack_chat import SlackChat
from .slack_conversations import SlackConversations
from .slack_files import SlackFiles
from .slack_limits import SlackLimits

__all__ = [
    "APP_ID",
    "BOT_ID",
    "BOT_USER_ID",
    "TEAM_ID",
    "FakeSlack",
    "ResponseAttempt",
    "SlackCall",
    "SlackFault",
]


class FakeSlack(SlackChat, SlackConversations, SlackCallLog, SlackFiles, FakeHTTPServer):
    """A Slack Web API double. See the module docstring; all state access is thread-safe.

    Flags:
      strict_update — `chat.update` of an unknown ts answers `message_not_found`.
      strict_threads — `conversations.replies` of an unknown thread answers `thread_not_found`.
      require_include_all_metadata — only return message `metadata` when the caller passed
        `include_all_metadata=true` (as real Slack does); off by default.
      valid_tokens — when set, any other bearer token gets `invalid_auth`.
      refuse_charts — a post or update carrying a `data_visualization` block answers
        `invalid_blocks`, as a workspace without the block does. Without it, such a
        message is taken only when its blocks validate (`slack_charts.blocks_problems`).
      rate_limits — Slack's limits on `chat.update` (about 50 a minute per workspace) and
        `chat.postMessage` (a short burst, then one a second per channel), answered as
        Slack does: HTTP 429 `ratelimited` with `Retry-After` (`slack_limits`). On by
        default, as in Slack; `limits` holds them (`limits.enabled`, the sizes), and
        `reset` restores the constructor's choice.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        latency: float = 0.0,
        strict_update: bool = False,
        strict_threads: bool = False,
        require_include_all_metadata: bool = False,
        usergroups: dict[str, list[str]] | None = None,
        valid_tokens: Iterable[str] | None = None,
        refuse_charts: bool = False,
        rate_limits: bool = True,
    ) -> None:
        super().__init__(port=port, latency=latency)
        self.strict_update = strict_update
        self.strict_threads = strict_threads
        self.require_include_all_metadata = require_include_all_metadata
        self.usergroups: dict[str, list[str]] = dict(usergroups or {})
        self.valid_tokens: set[str] | None = set(valid_tokens) if valid_tokens else None
        self.refuse_charts = refuse_charts
        self._rate_limits = rate_limits
        self.limits = SlackLimits(enabled=rate_limits)
        #: extra per-method latency (seconds), added to `latency`
        self.method_latency: dict[str, float] = {}
        #: extra latency (seconds) for calls whose params a predicate accepts, see `slow_when`
        self.call_latency: list[tuple[str, Callable[[dict[str, Any]], bool], float]] = []
        self.calls: list[SlackCall] = []
        self.messages: dict[str, list[dict[str, Any]]] = {}
        self.responses: dict[str, list[dict[str, Any]]] = {}
        self.response_attempts: list[ResponseAttempt] = []
        self._expired: set[str] = set()
        self._faults: dict[str, deque[SlackFault]] = {}
        self._channel_errors: dict[str, str] = {}
        self._counter = 0
        self._last_micros = 0
        self._ts_lock = threading.Lock()
        self._init_files()

    # -- URLs ------------------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    def response_url(self, token: str) -> str:
        return f"{self.url}/response/{token}"

    # -- scripting -------------------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        status: int = 200,
        error: Any = None,
        retry_after: int | None = None,
        times: int = 1,
        when: Callable[[dict[str, Any]], bool] | None = None,
        body: dict[str, Any] | None = None,
        after: bool = False,
    ) -> SlackFault:
        """Make the next `times` calls to `method` fail.

        `method` may be "*" (any Web API method) or "response" (any response_url POST).
        status 200 answers `{"ok": false, "error": error or "internal_error"}`; other statuses
        answer that HTTP status with a JSON `ok:false` body (error defaults to "ratelimited" for
        429, else "fatal_error"); `retry_after` adds a `Retry-After` header. `error` may be any
        JSON value (Slack has answered objects there). `body` answers that JSON verbatim (odd
        shapes). `when` limits the fault to calls whose params it accepts. `after` carries the
        call out first and then answers with the fault, like a Slack that stored a post but
        whose answer was lost.
        """
        fault = SlackFault(
            status=status,
            error=error,
            retry_after=retry_after,
            remaining=times,
            when=when,
            body=body,
            after=after,
        )
        with self._lock:
            self._faults.setdefault(method, deque()).append(fault)
        return fault

    def slow_when(
        self, method: str, when: Callable[[dict[str, Any]], bool], seconds: float
    ) -> None:
        """Answer calls to `method` whose params `when` accepts `seconds` later (the
        call is carried out after the wait, as a slow Slack would)."""
        with self._lock:
            self.call_latency.append((method, when, seconds))

    def clear_failures(self) -> None:
        with self._lock:
            self._faults.clear()
            self._channel_errors.clear()

    def set_channel_error(self, channel: str, error: str | None) -> None:
        """Fail every chat.postMessage / chat.update to `channel` with `error` (None clears)."""
        with self._lock:
            if error is None:
                self._channel_errors.pop(channel, None)
            else:
                self._channel_errors[channel] = error

    def clear_channel_error(self, channel: str) -> None:
        self.set_channel_error(channel, None)

    def expire_response_url(self, token: str) -> None:
        """POSTs to this response_url now answer 404, like an expired one."""
        with self._lock:
            self._expired.add(token)

    def add_message(
        self,
        channel: str,
        text: str = "",
        *,
        ts: str | None = None,
        thread_ts: str | None = None,
        metadata: dict[str, Any] | None = None,
        blocks: list[Any] | None = None,
        user: str = BOT_USER_ID,
        bot_id: str | None = BOT_ID,
    ) -> dict[str, Any]:
        """Seed a message (e.g. a thread left by an earlier bot process) without a recorded call."""
        msg: dict[str, Any] = {
            "type": "message",
            "ts": ts or self._next_ts(),
            "text": text,
            "user": user,
        }
        if bot_id:
            msg["bot_id"] = bot_id
        if blocks is not None:
            msg["blocks"] = blocks
        if thread_ts:
            msg["thread_ts"] = thread_ts
        if metadata is not None:
            msg["metadata"] = metadata
        with self._lock:
            self.messages.setdefault(channel, []).append(msg)
        self._notify()
        return dict(msg)

    def reset(self) -> None:
        """Forget calls, messages, responses, faults, channel errors, expired URLs and what
        the rate limits counted."""
        with self._lock:
            self.calls.clear()
            self.messages.clear()
            self.responses.clear()
            self.response_attempts.clear()
            self._expired.clear()
            self._faults.clear()
            self._channel_errors.clear()
            self.call_latency.clear()
            self.handler_errors.clear()
            self.refuse_charts = False
            self.max_in_flight = self.in_flight
            self._init_files()
        self.limits.reset()
        self.limits.enabled = self._rate_limits

    # -- server ----------------------------------------------------------------------------------

    def _latency_for(self, request: Request) -> float:
        method = request.path.removeprefix("/api/")
        extra = 0.0
        with self._lock:
            scripted = list(self.call_latency)
        if scripted:
            params = request.params()
            extra = sum(s for m, when, s in scripted if m == method and when(params))
        return self.latency + self.method_latency.get(method, 0.0) + extra

    def _dump(self) -> str:
        lines = [f"{len(self.calls)} Slack calls:"]
        for c in self.calls[-50:]:
            params = {k: v for k, v in c.params.items() if k != "token"}
            shown = json.dumps(params, default=str)
            if len(shown) > 300:
                shown = shown[:300] + "…"
            status = "ok" if c.ok else f"FAILED {c.status} {c.error}"
            lines.append(f"  {c.method} [{status}] {shown}")
        lines.append(f"responses: {json.dumps(self.responses, default=str)[:1000]}")
        return "\n".join(lines)

    def _next_ts(self) -> str:
        """Like Slack: the epoch time of the post, unique per channel (here: globally)."""
        with self._ts_lock:
            self._counter += 1
            micros = max(int(time.time() * 1_000_000), self._last_micros + 1)
            self._last_micros = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"

    def _handle(self, request: Request) -> Response:
        if request.path.startswith("/response/"):
            return self._handle_response_url(request)
        if request.path.startswith("/upload/"):
            return self._handle_upload(request)
        if not request.path.startswith("/api/"):
            return Response.text("not found", status=404)
        method = request.path[len("/api/") :]
        params = request.params()
        call = SlackCall(method=method, params=params, headers=request.headers, at=request.at)
        status, body, headers = self._api(method, params, call)
        call.status = status
        call.ok = bool(body.get("ok"))
        call.error = None if call.ok else str(body.get("error"))
        call.response = body
        with self._cond:
            self.calls.append(call)
            self._cond.notify_all()
        return Response.json(body, status=status, headers=headers)

    def _take_fault(self, *keys: str, params: dict[str, Any] | None = None) -> SlackFault | None:
        with self._lock:
            for key in keys:
                for fault in self._faults.get(key) or ():
                    if fault.when is not None and not fault.when(params or {}):
                        continue
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults[key].remove(fault)
                    return fault
        return None

    def _api(
        self, method: str, params: dict[str, Any], call: SlackCall
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        fault = self._take_fault(method, "*", params=params)
        if fault is not None:
            headers = {}
            if fault.retry_after is not None:
                headers["Retry-After"] = str(fault.retry_after)
            if fault.after:
                handler = getattr(self, "_m_" + method.replace(".", "_"), None)
                if handler is not None:
                    handler(params)
            if fault.body is not None:
                return fault.status, dict(fault.body), headers
            if fault.status == 200:
                error = fault.error or "internal_error"
            else:
                error = fault.error or ("ratelimited" if fault.status == 429 else "fatal_error")
            return fault.status, {"ok": False, "error": error}, headers
        if self.valid_tokens is not None and call.token not in self.valid_tokens:
            return 200, {"ok": False, "error": "invalid_auth"}, {}
        channel = call.channel
        if method in ("chat.postMessage", "chat.update") and channel:
            with self._lock:
                channel_error = self._channel_errors.get(channel)
            if channel_error:
                return 200, {"ok": False, "error": channel_error}, {}
            wait = self.limits.take(method, workspace=call.token or TEAM_ID, channel=channel)
            if wait is not None:
                return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(wait)}
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return 200, {"ok": True}, {}
        body: dict[str, Any] = handler(params)
        return 200, body, {}

    # -- response_url ----------------------------------------------------------------------------

    def _handle_response_url(self, request: Request) -> Response:
        token = request.path[len("/response/") :]
        body: Any = parse_body(request.body, request.content_type)
        if not body and request.body:
            body = {"_raw": request.body.decode("utf-8", errors="replace")}
        fault = self._take_fault("response")
        with self._cond:
            if token in self._expired:
                status, reply = 404, "expired_url"
            elif fault is not None:
                status = fault.status if fault.status != 200 else 500
                reply = fault.error or "internal_error"
            else:
                status, reply = 200, "ok"
                self.responses.setdefault(token, []).append(body)
            self.response_attempts.append(ResponseAttempt(token=token, body=body, status=status))
            self._cond.notify_all()
        headers = {}
        if fault is not None and fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
        return Response.text(reply, status=status, headers=headers)
