"""`FakeTogether`: a Together-API-shaped HTTP server for RL training sessions.

It answers the shapes of Together's own SDK (`together` 3.1.1,
`together.types.post_training`), field for field; tests/together/test_together_contract.py
validates every kind of answer with those models in strict mode.

Routes (under `base_url` = http://127.0.0.1:<port>/v1, bearer auth against `api_key`):

    GET  /v1/rl/training-sessions/{id}        Session, or a 404 error object
    POST /v1/rl/training-sessions/{id}/stop   Session, status -> TRAINING_SESSION_STATUS_STOPPING
    GET  /v1/rl/training-sessions?status[]=A&status[]=B&created_by=&model_resources_id=&limit=&after=
                                              SessionsListResponse {"data", "meta"}; `status`
                                              also works once or comma-joined (as the SDK sends it)
    GET  /v1/rl/model-resources/{id}          ModelResources (stored, or made up for an id a
                                              stored session points at)
    GET  /v1/rl/model-resources?status[]=&created_by=&limit=&after=   ModelResourcesListResponse
    POST /v1/rl/model-resources/estimate-cost  {"currency", "price_per_hour"}: `prices[gpu_type]`
                                              per generator replica (the trainer counts as one),
                                              in `currencies[gpu_type]` (USD when not named)
    POST /v1/rl/model-resources/{id}/stop     ModelResources, status -> STOPPING; `force` from
                                              the JSON body or the query (`?force=true`, as the
                                              SDK sends it); without it, a 400
                                              `failed_precondition` while a session on it is
                                              CREATING, RUNNING or STOPPING; with it, those
                                              sessions go to STOPPING too
    POST /v1/rl/model-resources/{id}/extend-expiry  {"seconds": int} -> ModelResources with
                                              `expires_at` moved to at least now + seconds;
                                              a 400 `failed_precondition` unless READY
    GET  /v1/rl/checkpoints/{id}/download?variant=CHECKPOINT_VARIANT_ADAPTER|_MERGED
                                              CheckpointDownloadResponse {"data": [{"filename",
                                              "size", "url"}]} with presigned-looking URLs (each
                                              signature kept in `download_signatures`); 400 for a
                                              training checkpoint or ADAPTER of a non-LoRA session

Pagination is under `meta`: `next_cursor` is the id of the page's last item, "" when
`has_more` is false. With `page_rows` set, a page holds at most that many rows whatever
`limit` asks (a short page that still says `has_more`). With `endless_list` set, the session list never ends: past the
last real page it says `has_more` with a fresh cursor each time, one made-up live
session a page (a broken cursor). Errors are `{"error": {"message", "type", "param", "code"}}`.
Faults (`fail`) are applied before authentication, like a proxy or gateway in front of the API;
one scripted with `after=True` replaces the answer of a request that was served (a stop that
took effect, then an odd body or no answer in time). `route` limits a fault to one route.

`GET /v1/rl/training-sessions?limit=1` is the bot's start-up check of its key
(`bot.slack.preflight`): answered as the list it is, but kept in `key_checks`, out of
`requests`, `paths` and the counts, so tests counting the bot's work do not count it;
only faults scripted with `route="key_check"` apply to it.

`raw_json` gives a field a value sent as raw JSON text, such as an integer of 5,000 digits.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, unquote, urlsplit

from ._http import Request, Response, refusing_port
from .together_actions import AlertActionRoutes
from .together_faults import TogetherFault, TogetherFaults
from .together_lists import ListRoutes
from .together_resources import ResourceRoutes
from .together_shapes import (
    DEFAULT_ERROR_CODE,
    DEFAULT_PRICES,
    KEY_OWNER,
    RESOURCE_STATUSES,
    SESSION_ERROR_CODES,
    STATUS_PREFIX,
    error_body,
    full_status,
    make_model_resource,
    make_old_shape_session,
    make_session,
)
from .together_store import TogetherRequest, TogetherStore

__all__ = [
    "DEFAULT_ERROR_CODE",
    "DEFAULT_PRICES",
    "KEY_OWNER",
    "RESOURCE_STATUSES",
    "SESSION_ERROR_CODES",
    "STATUS_PREFIX",
    "FakeTogether",
    "TogetherFault",
    "TogetherRequest",
    "error_body",
    "full_status",
    "make_model_resource",
    "make_old_shape_session",
    "make_session",
    "refusing_port",
]
_BASE = "/v1/rl/training-sessions"
_RESOURCES = "/v1/rl/model-resources"
_CHECKPOINTS = "/v1/rl/checkpoints"
#: the one request the bot's start-up check of its key sends
KEY_CHECK = _BASE + "?limit=1"


class FakeTogether(AlertActionRoutes, ListRoutes, ResourceRoutes, TogetherFaults, TogetherStore):
    """Together RL training-session API double. All state access is thread-safe."""

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
        """-> (route name, the id in the path)."""
        if path.rstrip("/") == _BASE:
            return "list", None
        if path.startswith(_BASE + "/"):
            rest = path[len(_BASE) + 1 :]
            if rest.endswith("/stop"):
                return "stop", unquote(rest[: -len("/stop")])
            if rest and "/" not in rest:
                return "get", unquote(rest)
        if path.rstrip("/") == _RESOURCES:
            return "resources", None
        if path.rstrip("/") == _RESOURCES + "/estimate-cost":
            return "estimate", None
        if path.startswith(_RESOURCES + "/"):
            rest = path[len(_RESOURCES) + 1 :]
            if rest.endswith("/stop"):
                return "resource_stop", unquote(rest[: -len("/stop")])
            if rest.endswith("/extend-expiry"):
                return "resource_extend", unquote(rest[: -len("/extend-expiry")])
            if rest and "/" not in rest:
                return "resource", unquote(rest)
        if path.startswith(_CHECKPOINTS + "/") and path.endswith("/download"):
            rest = path[len(_CHECKPOINTS) + 1 : -len("/download")]
            if rest and "/" not in rest:
                return "checkpoint_download", unquote(rest)
        return "unknown", None

    def _handle(self, request: Request) -> Response:
        route, session_id = self._route(request.path)
        auth = request.headers.get("authorization")
        key_check = request.method == "GET" and request.target == KEY_CHECK
        record = TogetherRequest(
            method=request.method,
            path=request.target,
            session_id=session_id,
            authorization=auth,
            at=request.at,
            body=request.body,
            route="key_check" if key_check else route,
        )
        with self._cond:
            if key_check:
                self.key_checks.append(record)
            else:
                self.requests.append(record)
                self.paths.append(request.target)
                self.auth_headers.append(auth)
                if session_id is not None:
                    self._counts[session_id] += 1
            self._cond.notify_all()
        if key_check:
            fault = self._take_fault(None, "key_check", request.target)
            faulted = self._faulted(fault) if fault is not None else None
            response = faulted or self._serve(request, route, session_id, auth)
        else:
            response = self._respond(request, route, session_id, auth)
        with self._lock:
            raw = dict(self._raw)
        for token, text in raw.items():
            response.body = response.body.replace(f'"{token}"'.encode(), text.encode())
        with self._cond:
            record.status = response.status if not response.disconnect else 0
            self._cond.notify_all()
        return response

    def _respond(
        self, request: Request, route: str, session_id: str | None, auth: str | None
    ) -> Response:
        fault = self._take_fault(session_id, route, request.target)
        if fault is not None and (faulted := self._faulted(fault)) is not None:
            return faulted
        served = _huge_numbers(self._serve(request, route, session_id, auth))
        late = self._take_fault(session_id, route, request.target, after=True)
        if late is not None:
            return self._faulted(late) or served
        return served

    def _serve(
        self, request: Request, route: str, session_id: str | None, auth: str | None
    ) -> Response:
        if auth != f"Bearer {self.api_key}":
            return Response.json(
                error_body("Invalid API key provided.", "invalid_api_key"), status=401
            )
        if route == "get" and request.method == "GET" and session_id is not None:
            with self._lock:
                if session_id in self.sessions:
                    self._advance(self.sessions[session_id])
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
        query = parse_qs(urlsplit(request.target).query, keep_blank_values=True)
        if route == "list" and request.method == "GET":
            return self._list_sessions(query, request.target)
        if route == "resource" and request.method == "GET" and session_id is not None:
            resource = self.resource(session_id)
            if resource is None:
                return Response.json(
                    error_body("Model resource not found", "not_found"), status=404
                )
            return Response.json(resource)
        if route == "resources" and request.method == "GET":
            return self._list_resources(query)
        if route == "estimate" and request.method == "POST":
            return self._estimate(request.body)
        if route == "resource_stop" and request.method == "POST" and session_id is not None:
            return self._stop_resource(session_id, request.body, query)
        if route == "resource_extend" and request.method == "POST" and session_id is not None:
            return self._extend_expiry(session_id, request.body)
        if route == "checkpoint_download" and request.method == "GET" and session_id is not None:
            return self._download(session_id, query)
        if route != "unknown":
            return Response.json(
                error_body(f"Method {request.method} not allowed", "method_not_allowed"),
                status=405,
            )
        return Response.json(error_body("Not found", "not_found"), status=404)


#: a non-finite float as `json.dumps` writes it, a bare value in an object or a list
_NON_FINITE = re.compile(rb"(?:(?<=[\[,:] )|(?<=\[))(-?)Infinity(?=[,\]}])")


def _huge_numbers(response: Response) -> Response:
    """A session holding an infinite float (`float("inf")` in `add`) is sent as
    Together's service would send an overflowing number: `1e999`, valid JSON that
    every reader takes as infinity (`Infinity` is not JSON)."""
    if b"Infinity" in response.body:
        response.body = _NON_FINITE.sub(rb"\g<1>1e999", response.body)
    return response


def _not_found() -> Response:
    return Response.json(error_body("Training session not found", "not_found"), status=404)
