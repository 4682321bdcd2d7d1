"""How a request goes to Together: rate limited, under one deadline, size capped.

All of it over one injected `httpx.AsyncClient`. The API key is sent only to
URLs built from `TOGETHER_BASE_URL`, and redirects are never followed, so the
key cannot leak to another host. The endpoints (`bot.together.client`,
`bot.together.resources`) build on `Transport`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from bot.together.budget import Ledger, consumer
from bot.together.errors import TogetherError, check_status, retry_after_seconds
from bot.together.gate import Gate

GLOBAL_PAUSE_CAP = 5.0
MAX_RESPONSE_BYTES = 4 << 20
# Answers larger than this are parsed in a worker thread, off the event loop.
PARSE_INLINE_BYTES = 256 << 10


class RateLimiter:
    """A global cap on requests per second, plus a shared pause after a 429."""

    def __init__(self, max_rps: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = 1.0 / max_rps if max_rps > 0 else 0.0
        self._clock = clock
        self._next = 0.0
        self._paused_until = 0.0
        self._lock = asyncio.Lock()

    def pause(self, seconds: float) -> None:
        self._paused_until = max(self._paused_until, self._clock() + seconds)

    @property
    def paused_for(self) -> float:
        return max(0.0, self._paused_until - self._clock())

    async def wait(self, max_wait: float | None = None) -> None:
        """Wait for a turn; if Together asked us to pause longer than `max_wait`,
        fail now rather than keep a user (or a lease) waiting."""
        self._check(max_wait)
        async with self._lock:
            now = self._clock()
            start = max(now, self._next, self._paused_until)
            self._next = start + self._interval
        if (delay := start - now) > 0:
            await asyncio.sleep(delay)
        # A 429 that came back while we waited for our turn pauses us too.
        while (paused := self.paused_for) > 0:
            self._check(max_wait)
            await asyncio.sleep(paused)

    def _check(self, max_wait: float | None) -> None:
        if max_wait is not None and (paused := self.paused_for) > max_wait:
            raise TogetherError(
                "rate_limited", "pausing after a 429", retry_after=paused, sent=False
            )


Observer = Callable[[str, float], None]


class Transport:
    """One client's requests: its limiter, its connection slots and its books."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: str,
        max_rps: float = 20.0,
        timeout: float = 10.0,
        observe: Observer | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        ledger: Ledger | None = None,
        gate: Gate | None = None,
    ) -> None:
        self._http = http
        # the request budget's shares: every request asks before it is sent
        self.gate = gate
        # every request sent, by kind and consumer: the request budget's books
        self.ledger = ledger or Ledger()
        self._max_bytes = max_response_bytes
        self._base = base_url.rstrip("/")
        self._key = api_key
        self._timeout = timeout
        self.limiter = RateLimiter(max_rps)
        self._observe = observe
        # Requests wait for a connection here, not inside httpcore's pool: the pool
        # rescans its whole queue on every hand-over, which is quadratic in a burst
        # of commands.
        self._slots = asyncio.Semaphore(_pool_size(http) or 32)

    async def _request(
        self,
        method: str,
        url: str,
        *,
        kind: str,
        max_wait: float | None = None,
        body: Any = None,
        parse: Callable[[Any], Any] | None = None,
        read: Callable[[bytes], Any] | None = None,
        sent: asyncio.Event | None = None,
    ) -> Any:
        """The decoded JSON of one request (decoded by `read` when given), passed
        through `parse` when given; the request is booked in `ledger` as `kind` once
        it is let go (not if held back). The budget's gate is asked last, so a grant
        is sent at once (`bot.together.gate.GRANT_SECONDS`)."""
        await self.limiter.wait(max_wait)
        if self.gate is not None:
            await self.gate.take(consumer())
        self.ledger.spend(kind)
        started = time.monotonic()
        label = "error"
        try:
            # One deadline for the whole exchange: a free connection, the headers
            # and every byte of the body. httpx's timeouts are per read, so a
            # server sending a byte a second would never trip them.
            async with asyncio.timeout(self._timeout), self._slots:
                response = await self._fetch(method, url, body, sent=sent)
            label = str(response.status_code)
        except TimeoutError as exc:
            label = "timeout"
            raise TogetherError("unavailable", "timed out") from exc
        except httpx.TimeoutException as exc:
            label = "timeout"
            raise TogetherError("unavailable", "timed out") from exc
        except httpx.HTTPError as exc:
            raise TogetherError("unavailable", type(exc).__name__) from exc
        except TogetherError:
            label = "too_large"
            raise
        finally:
            if self._observe is not None:
                self._observe(label, time.monotonic() - started)

        def decode() -> Any:
            data = self._decode(response, read)
            return parse(data) if parse is not None else data

        if len(response.content) > PARSE_INLINE_BYTES:
            # Big enough that decoding and validating would hold up other requests'
            # acks: a worker thread.
            return await asyncio.to_thread(decode)
        return decode()

    async def _fetch(
        self, method: str, url: str, body: Any = None, *, sent: asyncio.Event | None = None
    ) -> httpx.Response:
        """The answer with its body read, refusing one over `max_response_bytes`
        without holding more than that in memory."""
        async with self._http.stream(
            method,
            url,
            headers={"Authorization": f"Bearer {self._key}", "Accept": "application/json"},
            json=body,
            timeout=self._timeout,
            follow_redirects=False,
            extensions={"trace": _on_sent(sent)} if sent is not None else None,
        ) as streamed:
            received = bytearray()
            async for chunk in streamed.aiter_bytes():  # decoded: a gzip bomb counts in full
                received += chunk
                if len(received) > self._max_bytes:
                    raise TogetherError(
                        "bad_response",
                        f"answer larger than {self._max_bytes} bytes",
                        status=streamed.status_code,
                    )
        headers = [
            (k, v)
            for k, v in streamed.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return httpx.Response(
            streamed.status_code, headers=headers, content=bytes(received), request=streamed.request
        )

    def _decode(self, response: httpx.Response, read: Callable[[bytes], Any] | None = None) -> Any:
        status = response.status_code
        if status == 429:
            # Back off overall, briefly: every request pauses (a rate limit is usually
            # the account's), but at most GLOBAL_PAUSE_CAP, so one session's long
            # Retry-After (honoured for that session by the poller) stalls no others.
            self.limiter.pause(min(retry_after_seconds(response.headers) or 1.0, GLOBAL_PAUSE_CAP))
        check_status(response)
        try:
            return read(response.content) if read is not None else response.json()
        except (ValueError, RecursionError) as exc:
            # Not JSON, not UTF-8, nested too deep for the reader, or an integer
            # too long to convert: whatever the reason, a bad answer.
            raise TogetherError("bad_response", "body is not readable JSON", status=status) from exc


def _on_sent(sent: asyncio.Event) -> Callable[[str, dict[str, Any]], Awaitable[None]]:
    """An httpcore trace hook that sets `sent` once the request has been written."""

    async def trace(event: str, info: dict[str, Any]) -> None:
        if event.endswith(".send_request_body.complete"):
            sent.set()

    return trace


def _pool_size(http: httpx.AsyncClient) -> int | None:
    """The client's connection limit, when httpx's default transport tells it."""
    pool = getattr(getattr(http, "_transport", None), "_pool", None)
    size = getattr(pool, "_max_connections", None)
    return size if isinstance(size, int) and size > 0 else None
