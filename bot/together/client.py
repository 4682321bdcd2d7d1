"""Together's training-session API over one injected `httpx.AsyncClient`.

Failures become a `TogetherError` with a `kind` the rest of the bot can act
on (user wording, poller back-off, operator alerts). The API key is sent only
to URLs built from `TOGETHER_BASE_URL`, and redirects are never followed, so
the key cannot leak to another host.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from bot.rate_limits import parse_retry_after
from bot.together.budget import Ledger
from bot.training.resources import CostEstimate, ModelResource
from bot.training.sessions import RawSession, TrainingSession, is_session_id

log = logging.getLogger(__name__)

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
GLOBAL_PAUSE_CAP = 5.0
MAX_RESPONSE_BYTES = 4 << 20
# Answers larger than this are parsed in a worker thread, off the event loop.
PARSE_INLINE_BYTES = 256 << 10


class TogetherError(Exception):
    def __init__(
        self,
        kind: ErrorKind,
        detail: str = "",
        *,
        status: int | None = None,
        retry_after: float | None = None,
        sent: bool = True,
    ) -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind: ErrorKind = kind
        self.detail = detail
        self.status = status
        self.retry_after = retry_after
        # False when the request never left: the bot held it back during a
        # shared pause after another request's 429. Not this session's failure.
        self.sent = sent

    @property
    def user_message(self) -> str:
        return USER_MESSAGES[self.kind]

    @property
    def transient(self) -> bool:
        return self.kind in ("rate_limited", "unavailable", "bad_response")


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


class TogetherClient:
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
    ) -> None:
        self._http = http
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
        # (200 queued commands spent a quarter of the event loop there).
        self._slots = asyncio.Semaphore(_pool_size(http) or 32)

    def session_url(self, session_id: str) -> str:
        if not is_session_id(session_id):
            raise TogetherError("invalid_id")
        return f"{self._base}/rl/training-sessions/{quote(session_id, safe='')}"

    async def get_session(
        self,
        session_id: str,
        *,
        retries: int = 0,
        backoff: float = 0.5,
        max_wait: float | None = None,
    ) -> TrainingSession:
        """Fetch one session; transient failures are retried `retries` times, and a
        rate-limit pause longer than `max_wait` fails at once."""
        url = self.session_url(session_id)
        attempt = 0
        while True:
            try:
                session: TrainingSession = await self._request(
                    "GET",
                    url,
                    kind="get",
                    max_wait=max_wait,
                    parse=lambda d: _parse_session(d, session_id),
                )
                return session
            except TogetherError as exc:
                if not exc.transient or attempt >= retries:
                    raise
                delay = exc.retry_after if exc.retry_after is not None else backoff * 2**attempt
                if delay > 5:  # a user is waiting: do not sit on a long Retry-After
                    raise
                attempt += 1
                await asyncio.sleep(delay)

    async def list_sessions(
        self,
        *,
        status: str | Sequence[str] | None = None,
        created_by: str | None = None,
        model_resources_id: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> tuple[list[TrainingSession], str | None]:
        """One page of sessions, and the cursor of the next page (None on the last).

        Statuses go in the brackets form of Together's API notes
        (`status[]=A&status[]=B`; together 3.1.1's own client joins them with
        commas, which our test server accepts too), then `created_by` ("me" is
        the key's owner) and `model_resources_id`. Pagination is read from `meta` (`has_more`,
        `next_cursor`), with the older top-level keys as a fallback. Rows that do
        not parse are skipped, not fatal: one odd session must not hide the others."""
        rows, cursor = await self.list_session_rows(
            status=status,
            created_by=created_by,
            model_resources_id=model_resources_id,
            after=after,
            limit=limit,
        )
        return parse_sessions(rows), cursor

    async def get_session_row(
        self, session_id: str, *, max_wait: float | None = None
    ) -> RawSession:
        """One session as sent, its head read (`RawSession`): what the poller asks
        for, so a session whose row has not changed is not parsed whole again."""
        raw: RawSession = await self._request(
            "GET",
            self.session_url(session_id),
            kind="get",
            max_wait=max_wait,
            parse=lambda d: _raw_session(d, session_id),
        )
        return raw

    async def list_session_rows(
        self,
        *,
        status: str | Sequence[str] | None = None,
        created_by: str | None = None,
        model_resources_id: str | None = None,
        after: str | None = None,
        limit: int = 100,
        sent: asyncio.Event | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """`list_sessions` before its rows are parsed (`parse_sessions`): each a JSON
        object with a string id. The cursor is known first, so a caller paging
        through can ask for the next page while it parses this one; `sent` is set
        once this request has left (not at all through a transport that does not
        say so)."""
        statuses = [status] if isinstance(status, str) else list(status or [])
        params: list[tuple[str, str]] = []
        params.extend(("status[]", s) for s in statuses)
        if created_by:
            params.append(("created_by", created_by))
        if model_resources_id:
            params.append(("model_resources_id", model_resources_id))
        params.append(("limit", str(max(1, min(100, limit)))))
        if after:
            params.append(("after", after))
        data = await self._request(
            "GET",
            f"{self._base}/rl/training-sessions?{_query(params)}",
            kind="list_page",
            sent=sent,
        )
        if isinstance(data, list):
            items, body = data, {}
        elif isinstance(data, dict):
            body = data
            items = next(
                (
                    data[k]
                    for k in ("data", "training_sessions", "sessions")
                    if isinstance(data.get(k), list)
                ),
                [],
            )
        else:
            raise TogetherError("bad_response", "not a list of sessions")
        rows = [row for row in items if isinstance(row, dict) and isinstance(row.get("id"), str)]
        return rows, _next_cursor(body, rows[-1]["id"] if rows else None)

    async def stop_session(self, session_id: str) -> TrainingSession:
        """Ask Together to stop a session; answers with the session as it is now."""
        data = await self._request("POST", self.session_url(session_id) + "/stop", kind="stop")
        try:
            return _parse_session(data, session_id)
        except TogetherError:  # the stop was accepted; the body is just not a session
            return await self.get_session(session_id, retries=1)

    async def _request(
        self,
        method: str,
        url: str,
        *,
        kind: str,
        max_wait: float | None = None,
        body: Any = None,
        parse: Callable[[Any], Any] | None = None,
        sent: asyncio.Event | None = None,
    ) -> Any:
        """The decoded JSON of one request, passed through `parse` when given; the
        request is booked in `ledger` as `kind` once it is let go (not if held back)."""
        await self.limiter.wait(max_wait)
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
            data = self._decode(response)
            return parse(data) if parse is not None else data

        if len(response.content) > PARSE_INLINE_BYTES:
            # Big enough that decoding and validating would hold up other requests'
            # acks: a worker thread (measured on 4 MiB: a 0.7 s stall becomes 0.15 s).
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

    def _decode(self, response: httpx.Response) -> Any:
        status = response.status_code
        message = _error_message(response)
        if status == 404:
            if _together_error_body(response):
                raise TogetherError("not_found", message, status=status)
            # A gateway's or load balancer's page (a deploy, a misroute) says nothing
            # about the session: transient, never "gone".
            raise TogetherError("unavailable", "HTTP 404 without Together's error", status=status)
        if status in (401, 403):
            raise TogetherError("auth", message, status=status)
        if status == 429:
            # Back off overall, briefly: every request pauses (a rate limit is usually
            # the account's), but at most GLOBAL_PAUSE_CAP, so one session's long
            # Retry-After (honoured for that session by the poller) stalls no others.
            self.limiter.pause(min(retry_after_seconds(response.headers) or 1.0, GLOBAL_PAUSE_CAP))
            raise TogetherError(
                "rate_limited",
                message,
                status=status,
                retry_after=retry_after_seconds(response.headers),
            )
        if status >= 500 or status in (408, 409, 425):
            raise TogetherError(
                "unavailable",
                message or f"HTTP {status}",
                status=status,
                retry_after=retry_after_seconds(response.headers),
            )
        if status >= 400:
            raise TogetherError("bad_response", message or f"HTTP {status}", status=status)
        if 300 <= status < 400:
            raise TogetherError(
                "bad_response", f"unexpected redirect (HTTP {status})", status=status
            )
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise TogetherError("bad_response", "body is not JSON", status=status) from exc

    # -- model resources (issue 12: spend watch) --------------------------------------------

    def resource_url(self, resource_id: str) -> str:
        if not is_session_id(resource_id):  # same id alphabet: nothing that changes the path
            raise TogetherError("invalid_id")
        return f"{self._base}/rl/model-resources/{quote(resource_id, safe='')}"

    async def get_model_resource(
        self, resource_id: str, *, max_wait: float | None = None
    ) -> ModelResource:
        """One model resource: its status, GPUs, queue position and `expires_at`."""
        data = await self._request(
            "GET", self.resource_url(resource_id), kind="resource_get", max_wait=max_wait
        )
        return _parse_resource(data, resource_id)

    async def list_model_resources(
        self,
        *,
        status: str | Sequence[str] | None = None,
        created_by: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> tuple[list[ModelResource], str | None]:
        """One page of model resources and the next page's cursor (None on the last).

        Same conventions as `list_sessions`: `status[]=A&status[]=B`, pagination
        under `meta`, and a row that does not parse is skipped, not fatal."""
        statuses = [status] if isinstance(status, str) else list(status or [])
        params: list[tuple[str, str]] = [("status[]", s) for s in statuses]
        if created_by:
            params.append(("created_by", created_by))
        params.append(("limit", str(max(1, min(100, limit)))))
        if after:
            params.append(("after", after))
        data = await self._request(
            "GET", f"{self._base}/rl/model-resources?{_query(params)}", kind="resource_list_page"
        )
        if not isinstance(data, dict):
            raise TogetherError("bad_response", "not a list of model resources")
        items = data.get("data") if isinstance(data.get("data"), list) else []
        resources = _parse_each(ModelResource.model_validate, items or [], "model resource")
        return resources, _next_cursor(data, resources[-1].id if resources else None)

    async def estimate_cost(self, resource: ModelResource) -> CostEstimate:
        """Together's on-demand price per hour for this resource's own layout."""
        data = await self._request(
            "POST",
            f"{self._base}/rl/model-resources/estimate-cost",
            kind="estimate_cost",
            body=resource.estimate_body(),
        )
        if not isinstance(data, dict):
            raise TogetherError("bad_response", "not a cost estimate")
        try:
            estimate = CostEstimate.model_validate(data)
        except ValidationError as exc:
            raise TogetherError("bad_response", "not a cost estimate") from exc
        if estimate.price_per_hour is None:
            raise TogetherError("bad_response", "no price_per_hour")
        return estimate

    async def stop_model_resource(self, resource_id: str, *, force: bool = False) -> ModelResource:
        """Stop a resource, releasing (and no longer paying for) its GPUs.

        Without `force` Together refuses while a session on it is active; with it,
        those sessions stop too. `force` goes both in the JSON body (Together's API
        notes) and in the query (where together 3.1.1's client puts it)."""
        flag = "true" if force else "false"
        url = f"{self.resource_url(resource_id)}/stop?force={flag}"
        data = await self._request("POST", url, kind="resource_stop", body={"force": force})
        try:
            return _parse_resource(data, resource_id)
        except TogetherError:  # the stop was accepted; the body is just not a resource
            return await self.get_model_resource(resource_id)


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


def _next_cursor(body: dict[str, Any], last_id: str | None) -> str | None:
    """The next page's cursor from `meta` (or the older top level), None on the last page.

    `has_more` decides; a missing cursor falls back to the page's last id (the SDK
    documents `after` as the last session's id)."""
    meta = body.get("meta")
    sources = [meta, body] if isinstance(meta, dict) else [body]
    has_more = next((s["has_more"] for s in sources if isinstance(s.get("has_more"), bool)), None)
    cursor = next((str(s[k]) for s in sources for k in ("next_cursor", "after") if s.get(k)), None)
    if has_more is None:
        has_more = cursor is not None
    if not has_more:
        return None
    return cursor or last_id


_Parsed = TypeVar("_Parsed", TrainingSession, ModelResource, RawSession)


def _query(params: list[tuple[str, str]]) -> str:
    return "&".join(f"{k}={quote(v, safe='')}" for k, v in params)


def parse_sessions(rows: list[Any]) -> list[TrainingSession]:
    """The sessions of a page's rows (`list_session_rows`); see `_parse_each`."""
    return _parse_each(TrainingSession.model_validate, rows, "session")


def raw_sessions(rows: list[Any]) -> list[RawSession]:
    """A page's rows (`list_session_rows`) with their heads read; a row whose
    head does not parse is skipped, as `parse_sessions` skips it."""
    return _parse_each(RawSession.of, rows, "session")


def _parse_each(
    parse: Callable[[dict[str, Any]], _Parsed], items: list[Any], what: str
) -> list[_Parsed]:
    """A list page's rows; one that does not parse is skipped, not fatal: one odd
    row must not hide the others."""
    parsed = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            try:
                parsed.append(parse(item))
            except ValidationError:
                log.warning("skipping a %s that does not parse", what)
    return parsed


def _parse_one(
    parse: Callable[[dict[str, Any]], _Parsed], data: Any, expected_id: str, what: str
) -> _Parsed:
    """One object from an answer (`parse` reads it), which must be the one asked
    for (`what` names it in the error: "training session", "model resource")."""
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise TogetherError("bad_response", f"not a {what}")
    try:
        parsed = parse(data)
    except ValidationError as exc:
        raise TogetherError("bad_response", f"{exc.error_count()} invalid fields") from exc
    if parsed.id != expected_id:
        raise TogetherError("bad_response", f"answer is for another {what}")
    return parsed


def _raw_session(data: Any, session_id: str) -> RawSession:
    """`_parse_session` for `get_session_row`: the same checks, on the head."""
    return _parse_one(RawSession.of, data, session_id, "training session")


def _parse_session(data: Any, session_id: str) -> TrainingSession:
    return _parse_one(TrainingSession.model_validate, data, session_id, "training session")


def _parse_resource(data: Any, resource_id: str) -> ModelResource:
    return _parse_one(ModelResource.model_validate, data, resource_id, "model resource")
