"""Shared plumbing for the fakes: a stdlib `ThreadingHTTPServer` on 127.0.0.1 in a daemon thread.

The servers are real sockets, so they work from any event loop (or none), from pytest in-process
and from a separate benchmark process. Subclasses implement `_handle(request) -> Response`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar
from urllib.parse import parse_qs, urlsplit

from ._wire import Headers, Request, Response, parse_body

#: how long a wait helper waits by default: it returns as soon as its condition
#: holds, so this only bounds a failure, and a loaded test machine takes long
WAIT_SECONDS = 45.0

__all__ = [
    "FakeHTTPServer",
    "Headers",
    "Request",
    "Response",
    "Served",
    "parse_body",
    "refusing_port",
]

T = TypeVar("T")


@contextlib.contextmanager
def refusing_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port on `host` that refuses connections while the block runs: bound, so no
    other server on the machine can take it meanwhile, and never listening. (A port
    merely found free was taken by another test's server under load.)"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        yield port


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 1024
    allow_reuse_address = True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    fake: ClassVar[FakeHTTPServer]

    def setup(self) -> None:
        super().setup()
        self.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.fake._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _dispatch(self) -> None:
        at = time.monotonic()
        body = self._read_body()
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        request = Request(
            method=self.command,
            target=self.path,
            path=split.path,
            query=query,
            headers=Headers(self.headers.items()),
            body=body,
            at=at,
        )
        fake = self.fake
        fake._enter()
        try:
            delay = fake._latency_for(request)
            if delay > 0:
                fake.sleep(delay)
            response = fake._handle(request)
        except Exception:
            tb = traceback.format_exc()
            with fake._lock:
                fake.handler_errors.append(tb)
            response = Response.text(tb, status=500)
        finally:
            fake._leave()
        if response.disconnect:
            self.close_connection = True
            return
        try:
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(response.body)
        except OSError:
            self.close_connection = True


class Served:
    """`with fake:` starts a fake and stops it on the way out, however the test ended;
    `_await` waits on the fake's condition, which it notifies on every change."""

    _cond: threading.Condition

    def _await(self, check: Callable[[], T | None], timeout: float) -> T | None:
        """`check()` under the lock until it is truthy, re-checked at least every 50 ms (so
        outside state works too); what it last returned once `timeout` has passed."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = check()
                remaining = deadline - time.monotonic()
                if value or remaining <= 0:
                    return value
                self._cond.wait(min(remaining, 0.05))

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class FakeHTTPServer(Served):
    """Base for the fakes: lifecycle, thread-safe state, and wait helpers."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, latency: float = 0.0) -> None:
        self.host = host
        self._requested_port = port
        #: seconds slept in the handler thread before every request is answered
        self.latency: float = latency
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        # set to end the latencies being slept now (`end_waits`), then replaced
        self._waits = threading.Event()
        self._conns: set[socket.socket] = set()
        #: tracebacks of exceptions raised inside `_handle` (answered as HTTP 500)
        self.handler_errors: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        port: int = self._server.server_address[1]
        return port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        if self._server is not None:
            return self
        handler = type(f"{type(self).__name__}Handler", (_Handler,), {"fake": self})
        self._stopping.clear()
        server = _Server((self.host, self._requested_port), handler)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{type(self).__name__}:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()
        self.end_waits()
        server.shutdown()
        server.server_close()
        with self._lock:
            conns = list(self._conns)
            self._conns.clear()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if thread is not None:
            thread.join(timeout=5)
        self._server = None
        self._thread = None

    # -- hooks for subclasses --------------------------------------------------------------------

    def _handle(self, request: Request) -> Response:
        raise NotImplementedError

    def _latency_for(self, request: Request) -> float:
        return self.latency

    def _dump(self) -> str:
        return ""

    # -- helpers ---------------------------------------------------------------------------------

    def sleep(self, seconds: float) -> None:
        """Sleep in a handler thread; cut short when the server stops or `end_waits`."""
        with self._lock:
            waits = self._waits
        if not self._stopping.is_set():
            waits.wait(seconds)

    def end_waits(self) -> None:
        """Answer every request now held by its latency (later ones wait as scripted):
        a test holds calls open for as long as it looks, not for a guessed time."""
        with self._lock:
            waits, self._waits = self._waits, threading.Event()
        waits.set()

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._cond:
            self.in_flight -= 1
            self._cond.notify_all()

    def _notify(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _check(self, predicate: Callable[..., T | None]) -> T | None:
        takes_arg = _takes_argument(predicate)
        with self._lock:
            return predicate(self) if takes_arg else predicate()

    def wait_for(
        self,
        predicate: Callable[..., T | None],
        timeout: float = WAIT_SECONDS,
        *,
        message: str = "",
    ) -> T:
        """Block until `predicate(fake)` (or `predicate()`) is truthy and return its value.

        Woken on every recorded request and re-checked at least every 50 ms, so predicates over
        outside state (a database, a list in the test) work too. Raises AssertionError with a dump
        of the recorded state on timeout. Don't call it from a coroutine that shares its event
        loop with the code under test; use `wait_for_async` there.
        """
        value = self._await(lambda: self._check(predicate), timeout)
        if value:
            return value
        raise AssertionError(self._timeout_message(predicate, timeout, message))

    async def wait_for_async(
        self,
        predicate: Callable[..., T | None],
        timeout: float = WAIT_SECONDS,  # noqa: ASYNC109 - same signature as wait_for
        *,
        message: str = "",
    ) -> T:
        """Like `wait_for`, but yields to the event loop (polls every 10 ms)."""
        deadline = time.monotonic() + timeout
        while True:
            value = self._check(predicate)
            if value:
                return value
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.01)
        raise AssertionError(self._timeout_message(predicate, timeout, message))

    def _timeout_message(self, predicate: Callable[..., Any], timeout: float, message: str) -> str:
        name = getattr(predicate, "__name__", repr(predicate))
        try:
            source = inspect.getsource(predicate).strip()
        except (OSError, TypeError):
            source = name
        with self._lock:
            dump = self._dump()
            errors = list(self.handler_errors)
        head = f"{type(self).__name__}: condition not met within {timeout}s: {source}"
        if message:
            head += f"\n{message}"
        if errors:
            head += "\nhandler errors:\n" + "\n".join(errors)
        return f"{head}\n{dump}"


def _takes_argument(func: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params
    )
