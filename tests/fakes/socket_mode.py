"""`FakeSocketMode`: a Slack Socket Mode websocket server on 127.0.0.1, and `SocketModeSlack`.

How a Socket Mode client (slack-sdk's aiohttp `SocketModeClient`, under Bolt's
`AsyncSocketModeHandler`) talks to Slack, and what these fakes do for each step:

1. `POST apps.connections.open` with the app-level (`xapp-`) token; Slack answers
   `{"ok": true, "url": "wss://…/link/?ticket=…"}`. `SocketModeSlack` is a `FakeSlack` that
   answers it with `socket_url` (a `ws://127.0.0.1:<port>/link/?ticket=<n>` of a
   `FakeSocketMode`), and refuses any other token kind with `not_allowed_token_type` as
   Slack does.
2. The client opens the websocket; the server sends `{"type": "hello", "num_connections", …}`.
   Each URL is good for one connection, as Slack's are temporary: `FakeSocketMode` refuses
   the handshake (HTTP 401, recorded in `refused`) for a URL with no ticket or a ticket
   already used, so a client that reconnects must ask `apps.connections.open` again.
3. Slack pushes envelopes `{"envelope_id", "type": "slash_commands"|"interactive"|
   "events_api", "accepts_response_payload", "payload": {…}}`; the client acknowledges each
   with `{"envelope_id": …}` (plus `"payload"` for a response such as an ephemeral message).
   `FakeSocketMode.slash_command(...)` / `.interactive(...)` push them and record every text
   frame the client sends back (`received`, `ack_for`, `wait_for_ack`).
4. Slack may send `{"type": "disconnect", "reason": "refresh_requested"}` and later close
   the socket: `send_disconnect()` and `close_connections()` do that. `reset_connections()`
   drops every socket with a TCP reset and no close frame (a network failure); `stop()`
   takes the whole server away (the client should then report itself disconnected).

The server is aiohttp in a daemon thread with its own event loop, so the test (and the
`rl-bot socket` process under test) can be anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self, TypeVar

from aiohttp import WSMsgType, web

from bot.simulated._http import Served
from bot.simulated.signing import slash_command_payload
from bot.simulated.slack import FakeSlack, SlackCall

__all__ = ["FakeSocketMode", "SocketFrame", "SocketModeSlack"]

T = TypeVar("T")


class SocketModeSlack(FakeSlack):
    """A `FakeSlack` that also answers `apps.connections.open` with `socket_url`.

    `socket_url` None (the default) answers `{"ok": false, "error": "internal_error"}`,
    like a Slack that cannot hand out a socket right now.
    """

    def __init__(self, *args: Any, socket_url: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.socket_url = socket_url
        #: every URL `apps.connections.open` handed out, in order
        self.issued_urls: list[str] = []
        self._tickets = 0

    def _api(
        self, method: str, params: dict[str, Any], call: SlackCall
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        # Faults and `valid_tokens` apply first, as for every other method.
        status, body, headers = super()._api(method, params, call)
        if method == "apps.connections.open" and body.get("ok"):
            body = self._connections_open(call.token)
        return status, body, headers

    def _connections_open(self, token: str | None) -> dict[str, Any]:
        if not (token or "").startswith("xapp-"):
            return {"ok": False, "error": "not_allowed_token_type"}
        with self._lock:
            if self.socket_url is None:
                return {"ok": False, "error": "internal_error"}
            self._tickets += 1
            sep = "&" if "?" in self.socket_url else "?"
            url = f"{self.socket_url}{sep}ticket={self._tickets}"
            self.issued_urls.append(url)
        return {"ok": True, "url": url}


@dataclass
class SocketFrame:
    """A text frame the client sent (parsed as JSON when it is JSON)."""

    connection: int
    data: Any
    raw: str
    at: float = field(default_factory=time.monotonic)

    @property
    def envelope_id(self) -> str | None:
        if isinstance(self.data, dict):
            value = self.data.get("envelope_id")
            return value if isinstance(value, str) else None
        return None


@dataclass
class _Conn:
    id: int
    ws: web.WebSocketResponse
    path: str
    query: dict[str, str]
    transport: asyncio.BaseTransport | None = None
    opened_at: float = field(default_factory=time.monotonic)
    closed_at: float | None = None


class FakeSocketMode(Served):
    """A Socket Mode websocket server. See the module docstring; state access is thread-safe."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, app_id: str = "A1") -> None:
        self.host = host
        self._port = port
        self.app_id = app_id
        #: every text frame received from clients, in arrival order
        self.received: list[SocketFrame] = []
        #: envelopes pushed, by envelope_id: (envelope, monotonic time sent)
        self.pushed: dict[str, tuple[dict[str, Any], float]] = {}
        #: every connection ever accepted, in order (open or closed)
        self.connections: list[_Conn] = []
        #: handshakes refused, as (ticket or None, reason), in order
        self.refused: list[tuple[str | None, str]] = []
        #: tracebacks of errors in the server's handlers
        self.handler_errors: list[str] = []
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None

    @property
    def port(self) -> int:
        if not self._port:
            raise RuntimeError("FakeSocketMode was never started")
        return self._port

    @property
    def url(self) -> str:
        """What `apps.connections.open` should hand out (a ticket is appended to it)."""
        return f"ws://{self.host}:{self.port}/link/"

    def start(self) -> Self:
        """Listen (again, on the same port after a `stop()`), in a new thread and loop."""
        if self._thread is not None:
            return self
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self._port))
        self._port = int(sock.getsockname()[1])
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._serve,
            args=(sock, ready, failure),
            name=f"FakeSocketMode:{self._port}",
            daemon=True,
        )
        self._thread.start()
        if not ready.wait(10) or failure:
            raise RuntimeError(f"FakeSocketMode did not start: {failure}")
        return self

    def stop(self, *, code: int = 1001) -> None:
        """Close every socket (close frame `code`), stop listening, end the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(code), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._thread = None
        self._loop = None

    def _serve(self, sock: socket.socket, ready: threading.Event, failure: list[Any]) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            app = web.Application()
            app.router.add_get("/link", self._handle)
            app.router.add_get("/link/", self._handle)
            runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
            loop.run_until_complete(runner.setup())
            loop.run_until_complete(web.SockSite(runner, sock).start())
            self._runner = runner
            self._loop = loop
        except BaseException as exc:
            failure.append(exc)
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(runner.cleanup())
            loop.close()

    async def _shutdown(self, code: int) -> None:
        await self._close_open(code, b"server going away")
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _refusal(self, ticket: str | None) -> str | None:
        """Why a handshake with this ticket is refused, or None: a ticket is good once."""
        if not ticket:
            return "no ticket"
        if any(c.query.get("ticket") == ticket for c in self.connections):
            return "ticket already used"
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket")
        ws = web.WebSocketResponse(autoping=True)
        with self._cond:
            refusal = self._refusal(ticket)
            if refusal is None:
                conn = _Conn(
                    id=len(self.connections) + 1,
                    ws=ws,
                    path=request.path,
                    query=dict(request.query),
                    transport=request.transport,
                )
                self.connections.append(conn)
            else:
                self.refused.append((ticket, refusal))
            self._cond.notify_all()
        if refusal is not None:
            return web.json_response({"ok": False, "error": refusal}, status=401)
        await ws.prepare(request)
        try:
            await ws.send_str(
                json.dumps(
                    {
                        "type": "hello",
                        "num_connections": len(self.open_connections()),
                        "debug_info": {
                            "host": "applink-fake",
                            "build_number": 1,
                            "approximate_connection_time": 18060,
                        },
                        "connection_info": {"app_id": self.app_id},
                    }
                )
            )
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    raw = str(msg.data)
                    try:
                        data: Any = json.loads(raw)
                    except ValueError:
                        data = None
                    with self._cond:
                        self.received.append(SocketFrame(connection=conn.id, data=data, raw=raw))
                        self._cond.notify_all()
        except Exception:
            import traceback

            with self._lock:
                self.handler_errors.append(traceback.format_exc())
        finally:
            with self._cond:
                conn.closed_at = time.monotonic()
                self._cond.notify_all()
        return ws

    # -- scripting -------------------------------------------------------------------------------

    def _call(self, coro: Any, timeout: float = 20.0) -> Any:
        loop = self._loop
        if loop is None:
            coro.close()
            raise RuntimeError("FakeSocketMode is not running")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=timeout)

    def open_connections(self) -> list[_Conn]:
        with self._lock:
            return [c for c in self.connections if c.closed_at is None and not c.ws.closed]

    def push(self, envelope: dict[str, Any]) -> str:
        """Send an envelope on the newest open connection (as Slack does: one of them)."""
        conns = self.open_connections()
        if not conns:
            raise AssertionError("no open Socket Mode connection to push to")
        envelope = dict(envelope)
        envelope.setdefault("envelope_id", str(uuid.uuid4()))
        envelope_id = str(envelope["envelope_id"])
        with self._cond:
            self.pushed[envelope_id] = (envelope, time.monotonic())
        self._call(conns[-1].ws.send_str(json.dumps(envelope)))
        return envelope_id

    def slash_command(
        self,
        text: str,
        *,
        response_url: str,
        command: str = "/rl-session",
        user_id: str = "U123",
        channel_id: str = "C123",
        team_id: str = "T1",
        envelope_id: str | None = None,
        **fields: str,
    ) -> str:
        """Push a `slash_commands` envelope; returns its envelope_id."""
        payload: dict[str, Any] = {
            **slash_command_payload(
                text,
                command=command,
                user_id=user_id,
                channel_id=channel_id,
                team_id=team_id,
                response_url=response_url,
                api_app_id=self.app_id,
            ),
            **fields,
        }
        return self._push_payload("slash_commands", payload, envelope_id, accepts_response=True)

    def interactive(self, payload: dict[str, Any], *, envelope_id: str | None = None) -> str:
        """Push an `interactive` envelope (e.g. a `block_actions` payload as a dict)."""
        return self._push_payload("interactive", payload, envelope_id, accepts_response=False)

    def _push_payload(
        self, kind: str, payload: dict[str, Any], envelope_id: str | None, *, accepts_response: bool
    ) -> str:
        envelope: dict[str, Any] = {
            "type": kind,
            "accepts_response_payload": accepts_response,
            "payload": payload,
        }
        if envelope_id is not None:
            envelope["envelope_id"] = envelope_id
        return self.push(envelope)

    def send_disconnect(self, reason: str = "refresh_requested") -> None:
        """Slack's warning before it closes a socket: the client should open a new one."""
        self.push({"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-fake"}})

    def close_connections(self, code: int = 1001) -> None:
        """Close every open socket with a close frame; the server keeps listening."""
        self._call(self._close_open(code, b"closed by the test"))

    def reset_connections(self) -> None:
        """Drop every open socket with a TCP reset (no close frame); the server keeps listening."""
        self._call(self._reset_open())

    async def _reset_open(self) -> None:
        with self._lock:
            transports = [c.transport for c in self.connections if c.closed_at is None]
        for transport in transports:
            if transport is None or transport.is_closing():
                continue
            sock = transport.get_extra_info("socket")
            if sock is not None:  # linger 0: close() sends RST instead of FIN
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()

    async def _close_open(self, code: int, message: bytes) -> None:
        with self._lock:
            conns = [c for c in self.connections if c.closed_at is None]
        for conn in conns:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.ws.close(code=code, message=message), 5)

    # -- queries and waits -----------------------------------------------------------------------

    def ack_for(self, envelope_id: str) -> SocketFrame | None:
        with self._lock:
            return next((f for f in self.received if f.envelope_id == envelope_id), None)

    def ack_latency(self, envelope_id: str) -> float | None:
        """Seconds between pushing the envelope and receiving its acknowledgement."""
        with self._lock:
            ack = self.ack_for(envelope_id)
            pushed = self.pushed.get(envelope_id)
        if ack is None or pushed is None:
            return None
        return ack.at - pushed[1]

    def wait_for(
        self, predicate: Callable[[], T | None], timeout: float = 20.0, what: str = "condition"
    ) -> T:
        value = self._await(predicate, timeout)
        if value:
            return value
        raise AssertionError(
            f"FakeSocketMode: {what} not met within {timeout}s; "
            f"{len(self.connections)} connections, received={[f.raw for f in self.received]}"
            + (
                "\nhandler errors:\n" + "\n".join(self.handler_errors)
                if self.handler_errors
                else ""
            )
        )

    def wait_for_ack(self, envelope_id: str, timeout: float = 20.0) -> SocketFrame:
        return self.wait_for(
            lambda: self.ack_for(envelope_id), timeout, what=f"ack of envelope {envelope_id}"
        )

    def wait_connected(self, count: int = 1, timeout: float = 20.0) -> _Conn:
        """Until `count` connections have been accepted in all; returns the newest open one."""

        def newest() -> _Conn | None:
            if len(self.connections) < count:
                return None
            conns = self.open_connections()
            return conns[-1] if conns else None

        return self.wait_for(newest, timeout, what=f"{count} connection(s)")
