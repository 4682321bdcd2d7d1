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
from dataclasses import dataclass, field
from typing import Any

from ._http import FakeHTTPServer, Headers, Request, Response, parse_body
from .slack_charts import blocks_problems, has_chart
from .slack_files import SlackFiles

__all__ = ["FakeSlack", "SlackCall", "SlackFault"]

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


def _ts_key(ts: Any) -> float:
    try:
        return float(ts)
    except (TypeError, ValueError):
        return 0.0


class FakeSlack(SlackFiles, FakeHTTPServer):
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
    ) -> None:
        super().__init__(port=port, latency=latency)
        self.strict_update = strict_update
        self.strict_threads = strict_threads
        self.require_include_all_metadata = require_include_all_metadata
        self.usergroups: dict[str, list[str]] = dict(usergroups or {})
        self.valid_tokens: set[str] | None = set(valid_tokens) if valid_tokens else None
        self.refuse_charts = refuse_charts
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
        """Forget calls, messages, responses, faults, channel errors and expired URLs."""
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

    # -- queries ---------------------------------------------------------------------------------

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

    def messages_in(self, channel: str) -> list[dict[str, Any]]:
        """Stored messages of a channel (top-level and replies), oldest first."""
        with self._lock:
            return [dict(m) for m in self.messages.get(channel, [])]

    def thread(self, channel: str, ts: str) -> list[dict[str, Any]]:
        """Root (if known) plus replies, oldest first, as `conversations.replies` would list."""
        with self._lock:
            return [dict(m) for m in self._thread_messages(channel, ts)]

    def wait_for_response(self, token: str, timeout: float = 20.0) -> dict[str, Any]:
        """Block until something was POSTed to `response_url(token)`; return the first body."""
        return self.wait_for(
            lambda s: s.responses.get(token, [None])[0],
            timeout,
            message=f"no response_url POST for token {token!r}",
        )

    async def wait_for_response_async(
        self,
        token: str,
        timeout: float = 20.0,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        return await self.wait_for_async(
            lambda s: s.responses.get(token, [None])[0],
            timeout,
            message=f"no response_url POST for token {token!r}",
        )

    def wait_for_calls(
        self, method: str, count: int = 1, timeout: float = 20.0, *, ok: bool | None = True
    ) -> list[SlackCall]:
        """Block until at least `count` calls to `method` (only successful ones by default)."""
        return self.wait_for(
            self._calls_predicate(method, count, ok), timeout, message=f"{count}x {method}"
        )

    async def wait_for_calls_async(
        self,
        method: str,
        count: int = 1,
        timeout: float = 20.0,  # noqa: ASYNC109
        *,
        ok: bool | None = True,
    ) -> list[SlackCall]:
        return await self.wait_for_async(
            self._calls_predicate(method, count, ok), timeout, message=f"{count}x {method}"
        )

    @staticmethod
    def _calls_predicate(
        method: str, count: int, ok: bool | None
    ) -> Callable[[FakeSlack], list[SlackCall] | None]:
        def predicate(fake: FakeSlack) -> list[SlackCall] | None:
            found = [c for c in fake.calls_to(method) if ok is None or c.ok == ok]
            return found if len(found) >= count else None

        return predicate

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
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return 200, {"ok": True}, {}
        body: dict[str, Any] = handler(params)
        return 200, body, {}

    # -- Web API methods -------------------------------------------------------------------------

    def _m_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://example.slack.com/",
            "team": "Example",
            "user": "rl-bot",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    @staticmethod
    def _message_fields(params: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """Validated text/blocks/metadata of a post/update, or an error name."""
        fields: dict[str, Any] = {}
        if "text" in params and params["text"] is not None:
            fields["text"] = str(params["text"])
        if params.get("blocks") not in (None, ""):
            blocks = _as_json_list(params["blocks"])
            if blocks is None:
                return {}, "invalid_blocks_format"
            fields["blocks"] = blocks
        if params.get("attachments") not in (None, ""):
            fields["attachments"] = _as_json_list(params["attachments"]) or []
        if params.get("metadata") not in (None, ""):
            metadata = _as_json_dict(params["metadata"])
            if metadata is None or not isinstance(metadata.get("event_type"), str):
                return {}, "invalid_metadata_format"
            fields["metadata"] = {
                "event_type": metadata["event_type"],
                "event_payload": metadata.get("event_payload") or {},
            }
        return fields, None

    def _chart_refusal(self, fields: dict[str, Any]) -> dict[str, Any] | None:
        """Slack's answer to a message whose chart it does not take (None: taken)."""
        blocks = fields.get("blocks") or []
        if not has_chart(blocks):
            return None
        if self.refuse_charts:
            problems = ["unsupported type: data_visualization"]
        else:
            problems = blocks_problems(blocks)
        if not problems:
            return None
        return {
            "ok": False,
            "error": "invalid_blocks",
            "response_metadata": {"messages": [f"[ERROR] {p}" for p in problems]},
        }

    def _m_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = params.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        fields, error = self._message_fields(params)
        if error:
            return {"ok": False, "error": error}
        if refusal := self._chart_refusal(fields):
            return refusal
        if not (fields.get("text") or fields.get("blocks") or fields.get("attachments")):
            return {"ok": False, "error": "no_text"}
        msg: dict[str, Any] = {
            "type": "message",
            "ts": self._next_ts(),
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "app_id": APP_ID,
            "text": fields.pop("text", ""),
            **fields,
        }
        thread_ts = params.get("thread_ts")
        if thread_ts not in (None, ""):
            msg["thread_ts"] = str(thread_ts)
            if params.get("reply_broadcast") in _TRUE:
                msg["subtype"] = "thread_broadcast"
        with self._lock:
            self.messages.setdefault(str(channel), []).append(msg)
        return {"ok": True, "channel": channel, "ts": msg["ts"], "message": dict(msg)}

    def _m_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = params.get("channel"), params.get("ts")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not ts:
            return {"ok": False, "error": "message_not_found"}
        fields, error = self._message_fields(params)
        if error:
            return {"ok": False, "error": error}
        if refusal := self._chart_refusal(fields):
            return refusal
        with self._lock:
            found = next(
                (m for m in self.messages.get(str(channel), []) if m["ts"] == str(ts)), None
            )
            if found is None and self.strict_update:
                return {"ok": False, "error": "message_not_found"}
            message = {"type": "message", "ts": str(ts), "text": "", **fields}
            if found is not None:
                found.update(fields)
                found["edited"] = {"user": BOT_USER_ID, "ts": self._next_ts()}
                message = dict(found)
        return {
            "ok": True,
            "channel": channel,
            "ts": str(ts),
            "text": message.get("text", ""),
            "message": message,
        }

    def _m_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        if not params.get("channel"):
            return {"ok": False, "error": "channel_not_found"}
        if not params.get("user"):
            return {"ok": False, "error": "user_not_in_channel"}
        return {"ok": True, "message_ts": self._next_ts()}

    def _m_chat_getPermalink(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = params.get("channel"), str(params.get("message_ts") or "")
        if not channel or not ts:
            return {"ok": False, "error": "message_not_found"}
        return {
            "ok": True,
            "channel": channel,
            "permalink": f"https://example.slack.com/archives/{channel}/p{ts.replace('.', '')}",
        }

    def _visible(self, msg: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        out = dict(msg)
        if (
            "metadata" in out
            and self.require_include_all_metadata
            and params.get("include_all_metadata") not in _TRUE
        ):
            del out["metadata"]
        return out

    def _thread_messages(self, channel: str, ts: str) -> list[dict[str, Any]]:
        msgs = self.messages.get(channel, [])
        root = next((m for m in msgs if m["ts"] == ts), None)
        replies = [m for m in msgs if m.get("thread_ts") == ts and m["ts"] != ts]
        out: list[dict[str, Any]] = []
        if root is not None:
            root = dict(root)
            if replies:
                root["thread_ts"] = ts
                root["reply_count"] = len(replies)
                root["latest_reply"] = replies[-1]["ts"]
            out.append(root)
        out.extend(sorted(replies, key=lambda m: _ts_key(m["ts"])))
        return out

    @staticmethod
    def _page(
        items: list[dict[str, Any]], params: dict[str, Any], default_limit: int
    ) -> dict[str, Any]:
        try:
            start = int(params.get("cursor") or 0)
        except ValueError:
            return {"ok": False, "error": "invalid_cursor"}
        try:
            limit = int(params.get("limit") or default_limit) or default_limit
        except ValueError:
            limit = default_limit
        page = items[start : start + limit]
        more = start + limit < len(items)
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _m_conversations_replies(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(params.get("channel") or ""), str(params.get("ts") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        with self._lock:
            msgs = [self._visible(m, params) for m in self._thread_messages(channel, ts)]
        if not msgs and self.strict_threads:
            return {"ok": False, "error": "thread_not_found"}
        # The parent is always listed first; oldest/latest only trim the replies.
        head = [m for m in msgs[:1] if m["ts"] == ts]
        msgs = head + self._window(msgs[len(head) :], params)
        return self._page(msgs, params, 1000)

    def _m_conversations_history(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        with self._lock:
            msgs = [
                self._visible(m, params)
                for m in self.messages.get(channel, [])
                if m.get("thread_ts") in (None, m["ts"]) or m.get("subtype") == "thread_broadcast"
            ]
        msgs = self._window(msgs, params)
        msgs.sort(key=lambda m: _ts_key(m["ts"]), reverse=True)
        return self._page(msgs, params, 100)

    @staticmethod
    def _window(msgs: list[dict[str, Any]], params: dict[str, Any]) -> list[dict[str, Any]]:
        inclusive = params.get("inclusive") in _TRUE
        oldest, latest = params.get("oldest"), params.get("latest")
        out = []
        for m in msgs:
            t = _ts_key(m["ts"])
            if oldest not in (None, ""):
                o = _ts_key(oldest)
                if t < o or (t == o and not inclusive):
                    continue
            if latest not in (None, ""):
                la = _ts_key(latest)
                if t > la or (t == la and not inclusive):
                    continue
            out.append(m)
        return out

    def _m_usergroups_users_list(self, params: dict[str, Any]) -> dict[str, Any]:
        group = str(params.get("usergroup") or "")
        with self._lock:
            users = list(self.usergroups.get(group, []))
        return {"ok": True, "users": users}

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
