"""`FakeTogether`: a Together-API-shaped HTTP server for RL training sessions.

Routes (under `base_url` = http://127.0.0.1:<port>/v1, bearer auth against `api_key`):

    GET  /v1/rl/training-sessions/{id}        the stored session, or 404 error object
    POST /v1/rl/training-sessions/{id}/stop   status -> TRAINING_SESSION_STATUS_STOPPING
    GET  /v1/rl/training-sessions?status=&after=&limit=   cursor-paginated list

Faults (`fail`) are applied before authentication, like a proxy or gateway in front of the API.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

from ._http import FakeHTTPServer, Request, Response, free_port

__all__ = [
    "STATUS_PREFIX",
    "FakeTogether",
    "TogetherFault",
    "TogetherRequest",
    "free_port",
    "full_status",
    "make_session",
]

STATUS_PREFIX = "TRAINING_SESSION_STATUS_"
_SHORT = {"UNSPECIFIED", "CREATING", "RUNNING", "STOPPED", "STOPPING", "ERROR", "EXPIRED"}
DEFAULT_ERROR_MESSAGE = (
    "The session could not start because the selected resource has no available capacity."
)
_BASE = "/v1/rl/training-sessions"


def full_status(status: str) -> str:
    """`RUNNING` -> `TRAINING_SESSION_STATUS_RUNNING`; anything else is kept verbatim."""
    return STATUS_PREFIX + status.upper() if status.upper() in _SHORT else status


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_iso(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


def error_body(message: str, code: str, type_: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def make_session(
    id: str,
    status: str = "TRAINING_SESSION_STATUS_RUNNING",
    new_shape: bool = True,
    *,
    step: int | str | None = None,
    checkpoints: int = 1,
    drop: Iterable[str] = (),
    now: datetime | None = None,
    **over: Any,
) -> dict[str, Any]:
    """A realistic session dict in the old or new API shape.

    `status` may be short ("RUNNING"). New shape: display_name, base_model "Qwen/Qwen3.5-4B",
    metadata.wandb, policy_state, registration{model, adapter}, lora_config.train_unembed and
    `step` (default 42; pass a string to test lenient parsing). Old shape: registration
    {model_name, registered_at}, none of those fields, and `step` only if given. ERROR sessions
    get an `error` object. `checkpoints` sets how many of each checkpoint kind; `over` overrides
    top-level keys (None gives JSON null) and `drop` removes keys.
    """
    now = now or datetime.now(UTC)
    created = now - timedelta(minutes=30)
    status = full_status(status)
    session: dict[str, Any] = {"id": id}
    if new_shape:
        session["display_name"] = f"grpo-{id[:8]}"
        session["metadata"] = {
            "wandb": {
                "entity": "example-org",
                "project": "grpo-gsm8k",
                "group": "gsm8k-sweep",
                "run_name": f"run-{id[:8]}",
                "run_id": id[:8],
                "url": f"https://wandb.ai/example-org/grpo-gsm8k/runs/{id[:8]}",
            }
        }
    session["status"] = status
    if status == STATUS_PREFIX + "ERROR":
        session["error"] = {
            "message": DEFAULT_ERROR_MESSAGE,
            "occurred_at": _iso(now),
        }
    inference: list[dict[str, Any]] = []
    training: list[dict[str, Any]] = []
    for i in range(checkpoints):
        at = _iso(created + timedelta(minutes=5 * (i + 1)))
        ck_step = 10 * (i + 1)
        inf: dict[str, Any] = {"id": _uid(id, "inference", str(i)), "created_at": at}
        tr: dict[str, Any] = {"id": _uid(id, "training", str(i)), "created_at": at}
        if new_shape:
            inf["step"] = ck_step
            tr["step"] = ck_step
            inf["registration"] = {
                "model": {"id": f"ml_{id[:6]}{i}", "revision_id": f"rv_{i:06d}"},
                "adapter": {"id": f"ml_{id[:6]}a{i}", "revision_id": f"rv_a{i:05d}"},
            }
            tr["registration"] = {"id": f"ml_{id[:6]}t{i}", "revision_id": f"rv_t{i:05d}"}
        else:
            inf["registration"] = {
                "model_name": f"user_123/Meta-Llama-3-8B-rl-step-{ck_step}-20260216",
                "registered_at": at,
            }
        inference.append(inf)
        training.append(tr)
    session["inference_checkpoints"] = inference
    session["training_checkpoints"] = training
    session["created_at"] = _iso(created)
    session["updated_at"] = _iso(now)
    lora: dict[str, Any] = {"rank": 32, "alpha": 64}
    if new_shape:
        lora["train_unembed"] = True
    session["lora_config"] = lora
    session["model_resources_id"] = _uid(id, "model-resources")
    if new_shape:
        session["base_model"] = "Qwen/Qwen3.5-4B"
    session["created_by"] = "user_123"
    if new_shape:
        session["policy_state"] = {"pending_publish": False}
        session["step"] = 42 if step is None else step
    elif step is not None:
        session["step"] = step
    session.update(over)
    for key in drop:
        session.pop(key, None)
    return session


@dataclass
class TogetherFault:
    """A scripted fault; `remaining` None means until cleared. `hits` counts uses."""

    session_id: str | None
    status: int | None = None
    body: str | None = None
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    remaining: int | None = None
    delay: float | None = None
    disconnect: bool = False
    hits: int = 0


@dataclass
class TogetherRequest:
    method: str
    path: str
    session_id: str | None
    authorization: str | None
    at: float
    status: int = 0


class FakeTogether(FakeHTTPServer):
    """Together RL training-session API double. All state access is thread-safe."""

    def __init__(
        self, api_key: str = "test-together-key", *, port: int = 0, latency: float = 0.0
    ) -> None:
        super().__init__(port=port, latency=latency)
        self.api_key = api_key
        self.sessions: dict[str, dict[str, Any]] = {}
        self.requests: list[TogetherRequest] = []
        #: request targets (path + query) in arrival order
        self.paths: list[str] = []
        #: Authorization header values in arrival order (None when absent)
        self.auth_headers: list[str | None] = []
        #: ids POSTed to /stop, in order
        self.stop_requests: list[str] = []
        #: extra latency for one session's requests, added to `latency`
        self.session_latency: dict[str, float] = {}
        self._counts: Counter[str] = Counter()
        self._faults: list[TogetherFault] = []

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    # -- store -----------------------------------------------------------------------------------

    def make_session(
        self,
        id: str,
        status: str = "TRAINING_SESSION_STATUS_RUNNING",
        new_shape: bool = True,
        **over: Any,
    ) -> dict[str, Any]:
        """See module-level `make_session` (does not store it; `add` does)."""
        return make_session(id, status, new_shape, **over)

    def add(
        self,
        id: str,
        status: str = "TRAINING_SESSION_STATUS_RUNNING",
        new_shape: bool = True,
        **over: Any,
    ) -> dict[str, Any]:
        """`put(make_session(...))`; returns a copy of the stored session."""
        session = make_session(id, status, new_shape, **over)
        self.put(session)
        return copy.deepcopy(session)

    def put(self, session: dict[str, Any]) -> None:
        with self._cond:
            self.sessions[str(session["id"])] = copy.deepcopy(session)
            self._cond.notify_all()

    def get(self, id: str) -> dict[str, Any] | None:
        with self._lock:
            session = self.sessions.get(id)
            return copy.deepcopy(session) if session is not None else None

    def set_status(self, id: str, status: str, **fields: Any) -> dict[str, Any]:
        """Change status (short names allowed), merge `fields`, bump `updated_at`.

        Moving to ERROR adds a fresh `error` object unless `error` is passed.
        """
        with self._cond:
            session = self.sessions[id]
            status = full_status(status)
            session["status"] = status
            now = datetime.now(UTC).replace(microsecond=0)
            previous = _parse_iso(session.get("updated_at"))
            if previous is not None and now <= previous:
                now = previous + timedelta(seconds=1)
            session["updated_at"] = _iso(now)
            if status == STATUS_PREFIX + "ERROR" and "error" not in fields:
                session["error"] = {"message": DEFAULT_ERROR_MESSAGE, "occurred_at": _iso(now)}
            session.update(fields)
            self._cond.notify_all()
            return copy.deepcopy(session)

    def remove(self, id: str) -> None:
        with self._lock:
            self.sessions.pop(id, None)

    # -- counting --------------------------------------------------------------------------------

    def requests_for(self, id: str) -> int:
        """Requests (any route, any outcome) that named this session id."""
        with self._lock:
            return self._counts[id]

    @property
    def total_requests(self) -> int:
        with self._lock:
            return len(self.requests)

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self.paths.clear()
            self.auth_headers.clear()
            self.stop_requests.clear()
            self._counts.clear()
            self.handler_errors.clear()
            self.max_in_flight = self.in_flight

    def wait_for_requests(self, id: str | None, count: int, timeout: float = 10.0) -> int:
        """Block until `requests_for(id)` (or total, for None) reaches `count`."""
        return self.wait_for(self._reached(id, count), timeout, message=f"{count} requests")

    async def wait_for_requests_async(
        self,
        id: str | None,
        count: int,
        timeout: float = 10.0,  # noqa: ASYNC109
    ) -> int:
        return await self.wait_for_async(
            self._reached(id, count), timeout, message=f"{count} requests"
        )

    def _reached(self, id: str | None, count: int) -> Callable[[], int | None]:
        def predicate() -> int | None:
            n = self.total_requests if id is None else self.requests_for(id)
            return n if n >= count else None

        return predicate

    # -- faults ----------------------------------------------------------------------------------

    def fail(
        self,
        id: str | None,
        *,
        status: int | None = None,
        body: str | None = None,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        times: int | None = None,
        delay: float | None = None,
        disconnect: bool = False,
    ) -> TogetherFault:
        """Script a fault for one session id (or every request, for None).

        - `status` only: that status with a Together-style JSON error body.
        - `body`: that raw body (status defaults to 200), e.g. HTML or `[1,2]`.
        - `delay`: sleep first (a hang past the client timeout); with no status/body the normal
          response follows.
        - `disconnect`: close the connection without answering.
        - `times`: how many requests it applies to (None: until `clear_faults`).
        Session-specific faults win over global ones; among equals, the oldest first.
        """
        fault = TogetherFault(
            session_id=id,
            status=status,
            body=body,
            content_type=content_type,
            headers=dict(headers or {}),
            remaining=times,
            delay=delay,
            disconnect=disconnect,
        )
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self, *ids: str | None) -> None:
        """Remove every fault, or only those scripted for the given ids (None: global ones)."""
        with self._lock:
            if not ids:
                self._faults.clear()
            else:
                self._faults = [f for f in self._faults if f.session_id not in ids]

    def _take_fault(self, session_id: str | None) -> TogetherFault | None:
        with self._lock:
            candidates = [f for f in self._faults if f.session_id == session_id and session_id]
            candidates += [f for f in self._faults if f.session_id is None]
            if not candidates:
                return None
            fault = candidates[0]
            fault.hits += 1
            if fault.remaining is not None:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
            return fault

    # -- server ----------------------------------------------------------------------------------

    def _latency_for(self, request: Request) -> float:
        extra = 0.0
        if self.session_latency:
            sid = self._route(request.path)[1]
            if sid is not None:
                with self._lock:
                    extra = self.session_latency.get(sid, 0.0)
        return self.latency + extra

    def _dump(self) -> str:
        lines = [f"{len(self.requests)} Together requests:"]
        lines += [f"  {r.method} {r.path} -> {r.status}" for r in self.requests[-50:]]
        lines.append(f"sessions: {sorted(self.sessions)}")
        lines.append(f"faults: {self._faults}")
        return "\n".join(lines)

    @staticmethod
    def _route(path: str) -> tuple[str, str | None]:
        """-> (route name, session id)."""
        if path.rstrip("/") == _BASE:
            return "list", None
        if path.startswith(_BASE + "/"):
            rest = path[len(_BASE) + 1 :]
            if rest.endswith("/stop"):
                return "stop", unquote(rest[: -len("/stop")])
            if rest and "/" not in rest:
                return "get", unquote(rest)
        return "unknown", None

    def _handle(self, request: Request) -> Response:
        route, session_id = self._route(request.path)
        auth = request.headers.get("authorization")
        record = TogetherRequest(
            method=request.method,
            path=request.target,
            session_id=session_id,
            authorization=auth,
            at=request.at,
        )
        with self._cond:
            self.requests.append(record)
            self.paths.append(request.target)
            self.auth_headers.append(auth)
            if session_id is not None:
                self._counts[session_id] += 1
            self._cond.notify_all()
        response = self._respond(request, route, session_id, auth)
        with self._cond:
            record.status = response.status if not response.disconnect else 0
            self._cond.notify_all()
        return response

    def _respond(
        self, request: Request, route: str, session_id: str | None, auth: str | None
    ) -> Response:
        fault = self._take_fault(session_id)
        if fault is not None:
            if fault.delay:
                self.sleep(fault.delay)
            if fault.disconnect:
                return Response(disconnect=True)
            if fault.status is not None or fault.body is not None:
                status = 200 if fault.status is None else fault.status
                if fault.body is not None:
                    body = fault.body.encode()
                else:
                    body = json.dumps(_fault_error(status)).encode()
                return Response(
                    status=status,
                    body=body,
                    content_type=fault.content_type,
                    headers=dict(fault.headers),
                )
        if auth != f"Bearer {self.api_key}":
            return Response.json(
                error_body("Invalid API key provided.", "invalid_api_key"), status=401
            )
        if route == "get" and request.method == "GET" and session_id is not None:
            session = self.get(session_id)
            if session is None:
                return _not_found()
            return Response.json(session)
        if route == "stop" and request.method == "POST" and session_id is not None:
            with self._lock:
                if session_id not in self.sessions:
                    return _not_found()
                self.stop_requests.append(session_id)
            return Response.json(self.set_status(session_id, "STOPPING"))
        if route == "list" and request.method == "GET":
            return self._list(request.query)
        if route != "unknown":
            return Response.json(
                error_body(f"Method {request.method} not allowed", "method_not_allowed"),
                status=405,
            )
        return Response.json(error_body("Not found", "not_found"), status=404)

    def _list(self, query: dict[str, str]) -> Response:
        try:
            limit = max(1, min(100, int(query.get("limit") or 20)))
        except ValueError:
            return Response.json(error_body("Invalid limit", "invalid_parameter"), status=400)
        status = full_status(query["status"]) if query.get("status") else None
        with self._lock:
            items = [
                copy.deepcopy(s)
                for s in self.sessions.values()
                if status is None or s.get("status") == status
            ]
        after = query.get("after")
        if after:
            ids = [s["id"] for s in items]
            items = items[ids.index(after) + 1 :] if after in ids else []
        page = items[:limit]
        has_more = len(items) > limit
        cursor = page[-1]["id"] if page and has_more else None
        return Response.json(
            {"data": page, "has_more": has_more, "next_cursor": cursor, "after": cursor}
        )


def _not_found() -> Response:
    return Response.json(error_body("Training session not found", "not_found"), status=404)


def _fault_error(status: int) -> dict[str, Any]:
    if status == 429:
        return error_body("Rate limit exceeded", "rate_limit_exceeded", "rate_limit_error")
    if status >= 500:
        return error_body("Internal server error", "server_error", "server_error")
    if status == 401:
        return error_body("Invalid API key provided.", "invalid_api_key")
    if status == 404:
        return error_body("Training session not found", "not_found")
    return error_body(f"HTTP {status}", "error")
