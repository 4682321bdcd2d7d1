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
                                              per generator replica (the trainer counts as one)
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
from urllib.parse import parse_qs, unquote, urlsplit

from ._http import FakeHTTPServer, Request, Response, free_port
from .together_actions import AlertActionRoutes

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
    "free_port",
    "full_status",
    "make_model_resource",
    "make_old_shape_session",
    "make_session",
]

STATUS_PREFIX = "TRAINING_SESSION_STATUS_"
RESOURCE_PREFIX = "MODEL_RESOURCES_STATUS_"
_SHORT = {"UNSPECIFIED", "CREATING", "RUNNING", "STOPPED", "STOPPING", "ERROR", "EXPIRED"}
#: statuses the list endpoint filters on (SessionListParams: no UNSPECIFIED)
LISTABLE_STATUSES = frozenset(STATUS_PREFIX + s for s in _SHORT - {"UNSPECIFIED"})
RESOURCE_STATUSES = ("PENDING", "CREATING", "READY", "ERROR", "STOPPED", "STOPPING")
SESSION_ERROR_CODES = (
    "TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE",
    "TRAINING_SESSION_ERROR_CODE_RESOURCE_AT_CAPACITY",
    "TRAINING_SESSION_ERROR_CODE_TIMED_OUT",
    "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED",
)
DEFAULT_ERROR_CODE = "TRAINING_SESSION_ERROR_CODE_RESOURCE_AT_CAPACITY"
DEFAULT_ERROR_MESSAGE = (
    "The session could not start because the selected resource has no available capacity."
)
#: whom `created_by=me` means: the owner of the API key
KEY_OWNER = "user_123"
_BASE = "/v1/rl/training-sessions"
_RESOURCES = "/v1/rl/model-resources"
_CHECKPOINTS = "/v1/rl/checkpoints"
#: the one request the bot's start-up check of its key sends
KEY_CHECK = _BASE + "?limit=1"
#: hourly price per GPU group (trainer or one generator replica) in `estimate-cost`
DEFAULT_PRICES = {"H100-80GB": 12.5, "B200-SXM": 21.0}
#: the cursors of the made-up pages past the end of an endless session list
ENDLESS_CURSOR = "endless-"
#: session statuses that block a stop without `force`
_ACTIVE = frozenset(STATUS_PREFIX + s for s in ("CREATING", "RUNNING", "STOPPING"))


def full_status(status: str) -> str:
    """`RUNNING` -> `TRAINING_SESSION_STATUS_RUNNING`; anything else is kept verbatim."""
    return STATUS_PREFIX + status.upper() if status.upper() in _SHORT else status


def full_resource_status(status: str) -> str:
    """`READY` -> `MODEL_RESOURCES_STATUS_READY`; anything else is kept verbatim."""
    return RESOURCE_PREFIX + status.upper() if status.upper() in RESOURCE_STATUSES else status


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


def error_body(
    message: str, code: str, type_: str = "invalid_request_error", param: str | None = None
) -> dict[str, Any]:
    """Together's error object: `{"error": {"message", "type", "param", "code"}}`."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def session_error(now: datetime, code: str = DEFAULT_ERROR_CODE) -> dict[str, Any]:
    """A SessionError: code, message and occurred_at are all required."""
    return {"code": code, "message": DEFAULT_ERROR_MESSAGE, "occurred_at": _iso(now)}


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
    """A session as Together's service sends it (the SDK's `Session`, field for field).

    `status` may be short ("RUNNING"). int64 fields (steps, policy versions, the LoRA
    seed) are JSON strings, as the service sends them; `step` defaults to "42" (pass an
    int or any string to test parsing). ERROR sessions get an `error` with a code.
    Inference checkpoints carry `registration{model, adapter}` (deployable), training
    ones a bare `{id, revision_id}` artifact (resumable training state). `checkpoints`
    sets how many of each kind; `over` overrides top-level keys (None gives JSON null)
    and `drop` removes keys. `new_shape=False` is `make_old_shape_session`.
    """
    if not new_shape:
        return make_old_shape_session(
            id, status, step=step, checkpoints=checkpoints, drop=drop, now=now, **over
        )
    now = now or datetime.now(UTC)
    created = now - timedelta(minutes=30)
    status = full_status(status)
    step = "42" if step is None else step
    inference: list[dict[str, Any]] = []
    training: list[dict[str, Any]] = []
    for i in range(checkpoints):
        at = _iso(created + timedelta(minutes=5 * (i + 1)))
        ck_step = str(10 * (i + 1))
        inference.append(
            {
                "id": _uid(id, "inference", str(i)),
                "created_at": at,
                "step": ck_step,
                "registration": {
                    "model": {"id": f"ml_{id[:6]}{i}", "revision_id": f"rv_{i:06d}"},
                    "adapter": {"id": f"ml_{id[:6]}a{i}", "revision_id": f"rv_a{i:05d}"},
                },
            }
        )
        training.append(
            {
                "id": _uid(id, "training", str(i)),
                "created_at": at,
                "step": ck_step,
                "registration": {"id": f"ml_{id[:6]}t{i}", "revision_id": f"rv_t{i:05d}"},
            }
        )
    session: dict[str, Any] = {
        "id": id,
        "display_name": f"grpo-{id[:8]}",
        "status": status,
        "base_model": "Qwen/Qwen3.5-4B",
        "model_resources_id": _uid(id, "model-resources"),
        "created_by": KEY_OWNER,
        "created_at": _iso(created),
        "updated_at": _iso(now),
        "step": step,
        "policy_state": {
            "applied_weights_version": step,
            "target_weights_version": step,
            "trainer_step": step,
            "pending_publish": False,
        },
        "lora_config": {
            "rank": 32,
            "alpha": 64,
            "dropout": 0.05,
            "seed": "1234",
            "train_unembed": True,
        },
        "metadata": {
            "wandb": {
                "entity": "example-org",
                "project": "grpo-gsm8k",
                "group": "gsm8k-sweep",
                "run_name": f"run-{id[:8]}",
                "run_id": id[:8],
                "url": f"https://wandb.ai/example-org/grpo-gsm8k/runs/{id[:8]}",
            }
        },
        "inference_checkpoints": inference,
        "training_checkpoints": training,
    }
    if status == STATUS_PREFIX + "ERROR":
        session["error"] = session_error(now)
    session.update(over)
    for key in drop:
        session.pop(key, None)
    return session


def make_old_shape_session(
    id: str,
    status: str = "TRAINING_SESSION_STATUS_RUNNING",
    *,
    step: int | str | None = None,
    checkpoints: int = 1,
    drop: Iterable[str] = (),
    now: datetime | None = None,
    **over: Any,
) -> dict[str, Any]:
    """The older seed page's shape, for backward-compatibility tests only.

    No display_name, base_model, metadata or policy_state; inference registrations are
    `{model_name, registered_at}`, training checkpoints have none; `step` only if given;
    an ERROR session's `error` has no code. Together's SDK does not accept it (the
    contract test checks that it stays this way)."""
    now = now or datetime.now(UTC)
    created = now - timedelta(minutes=30)
    status = full_status(status)
    session: dict[str, Any] = {"id": id, "status": status}
    if status == STATUS_PREFIX + "ERROR":
        session["error"] = {"message": DEFAULT_ERROR_MESSAGE, "occurred_at": _iso(now)}
    inference: list[dict[str, Any]] = []
    training: list[dict[str, Any]] = []
    for i in range(checkpoints):
        at = _iso(created + timedelta(minutes=5 * (i + 1)))
        inference.append(
            {
                "id": _uid(id, "inference", str(i)),
                "created_at": at,
                "registration": {
                    "model_name": f"user_123/Meta-Llama-3-8B-rl-step-{10 * (i + 1)}-20260216",
                    "registered_at": at,
                },
            }
        )
        training.append({"id": _uid(id, "training", str(i)), "created_at": at})
    session["inference_checkpoints"] = inference
    session["training_checkpoints"] = training
    session["created_at"] = _iso(created)
    session["updated_at"] = _iso(now)
    session["lora_config"] = {"rank": 32, "alpha": 64}
    session["model_resources_id"] = _uid(id, "model-resources")
    session["created_by"] = KEY_OWNER
    if step is not None:
        session["step"] = step
    session.update(over)
    for key in drop:
        session.pop(key, None)
    return session


def make_model_resource(
    id: str,
    status: str = "MODEL_RESOURCES_STATUS_READY",
    *,
    base_model: str = "Qwen/Qwen3.5-4B",
    created_by: str = KEY_OWNER,
    now: datetime | None = None,
    drop: Iterable[str] = (),
    **over: Any,
) -> dict[str, Any]:
    """A model resource as the SDK's `ModelResources` (status may be short: "READY").

    PENDING has a queue position, READY an `expires_at`, ERROR an `error` with a code."""
    now = now or datetime.now(UTC)
    status = full_resource_status(status)
    resource: dict[str, Any] = {
        "id": id,
        "base_model": base_model,
        "compute_config": {"num_generator_replicas": 1, "gpu_type": "H100-80GB"},
        "created_at": _iso(now - timedelta(hours=1)),
        "created_by": created_by,
        "inactive_timeout": 3600,
        "lora_enabled": True,
        "optimizer_config": {"adam": {}},
        "status": status,
        "status_details": {},
        "updated_at": _iso(now),
    }
    if status == RESOURCE_PREFIX + "PENDING":
        resource["status_details"] = {"queue_position": 3}
    if status == RESOURCE_PREFIX + "READY":
        resource["expires_at"] = _iso(now + timedelta(hours=1))
    if status == RESOURCE_PREFIX + "ERROR":
        resource["error"] = {
            "code": "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED",
            "message": "The resource's pods could not be provisioned.",
            "occurred_at": _iso(now),
        }
    resource.update(over)
    for key in drop:
        resource.pop(key, None)
    return resource


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
    #: only requests whose target (path and query) contains this text, e.g. one page's cursor
    matching: str | None = None
    hits: int = 0
    #: only requests of this route (`FakeTogether._route`: get, stop, resource_stop, ...)
    route: str | None = None
    #: applied to the answer of a served request (its effect happened), not instead of it
    after: bool = False


@dataclass
class TogetherRequest:
    method: str
    path: str
    #: the id in the path (a session's, or a model resource's)
    session_id: str | None
    authorization: str | None
    at: float
    status: int = 0
    #: the request body as sent (JSON for the POSTs that take one)
    body: bytes = b""
    #: what the server took it for (`FakeTogether._route`: list, get, resource, ...)
    route: str = ""


class FakeTogether(AlertActionRoutes, FakeHTTPServer):
    """Together RL training-session API double. All state access is thread-safe."""

    def __init__(
        self, api_key: str = "test-together-key", *, port: int = 0, latency: float = 0.0
    ) -> None:
        super().__init__(port=port, latency=latency)
        self.api_key = api_key
        #: whom `created_by=me` means
        self.key_owner = KEY_OWNER
        self.sessions: dict[str, dict[str, Any]] = {}
        #: each session id's place in list order (kept when it is removed): the list's
        #: cursor is a position in it, so a session that changes or leaves between two
        #: pages moves no other session to another page (keyset pagination)
        self._order: dict[str, int] = {}
        #: called with each session-list request's target (path and query) after its
        #: page is computed and before it is sent: a test acts "between two pages" here
        self.on_list_page: Callable[[str], None] | None = None
        #: the session list never ends (see the module docstring)
        self.endless_list = False
        #: at most this many rows a list page, whatever `limit` asks (None: `limit`);
        #: a server may send fewer rows than asked, and the SDK's pagination allows it
        self.page_rows: int | None = None
        self.resources: dict[str, dict[str, Any]] = {}
        self.requests: list[TogetherRequest] = []
        #: the bot's start-up checks of its key (see the module docstring)
        self.key_checks: list[TogetherRequest] = []
        #: request targets (path + query) in arrival order
        self.paths: list[str] = []
        #: Authorization header values in arrival order (None when absent)
        self.auth_headers: list[str | None] = []
        #: ids POSTed to /stop, in order
        self.stop_requests: list[str] = []
        #: (resource id, force) POSTed to a model resource's /stop, in order
        self.resource_stop_requests: list[tuple[str, bool]] = []
        #: (resource id, seconds) POSTed to extend-expiry and served, in order
        self.extend_requests: list[tuple[str, int]] = []
        #: (checkpoint id, variant) of download requests served, in order
        self.download_requests: list[tuple[str, str]] = []
        #: the secret part of every presigned URL handed out: it must appear nowhere else
        self.download_signatures: list[str] = []
        #: JSON bodies POSTed to estimate-cost, in order
        self.estimate_requests: list[dict[str, Any]] = []
        #: estimate-cost's price per hour per GPU group, by GPU type
        self.prices: dict[str, float] = dict(DEFAULT_PRICES)
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

    def add_old_shape(
        self, id: str, status: str = "TRAINING_SESSION_STATUS_RUNNING", **over: Any
    ) -> dict[str, Any]:
        """Store a session in the older seed shape (see `make_old_shape_session`)."""
        session = make_old_shape_session(id, status, **over)
        self.put(session)
        return copy.deepcopy(session)

    def add_resource(
        self, id: str, status: str = "MODEL_RESOURCES_STATUS_READY", **over: Any
    ) -> dict[str, Any]:
        """Store a model resource (see `make_model_resource`); returns a copy."""
        resource = make_model_resource(id, status, **over)
        with self._cond:
            self.resources[id] = copy.deepcopy(resource)
            self._cond.notify_all()
        return resource

    def resource(self, id: str) -> dict[str, Any] | None:
        """A stored resource, else one made up for an id a stored session points at."""
        with self._lock:
            if id in self.resources:
                return copy.deepcopy(self.resources[id])
            owner = next(
                (s for s in self.sessions.values() if s.get("model_resources_id") == id), None
            )
            if owner is None:
                return None
            base_model = owner.get("base_model")
            created_by = owner.get("created_by")
        return make_model_resource(
            id,
            base_model=base_model if isinstance(base_model, str) else "Qwen/Qwen3.5-4B",
            created_by=created_by if isinstance(created_by, str) else KEY_OWNER,
        )

    def set_resource(
        self,
        id: str,
        status: str | None = None,
        *,
        queue_position: int | None = None,
        expires_at: datetime | str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Change a resource (made up from its sessions if not stored yet) and store it.

        `status` may be short ("READY"); leaving PENDING drops the queue position and
        leaving READY drops `expires_at`, as the service does. `queue_position` and
        `expires_at` (a datetime or RFC 3339 string) set those; `fields` merge last."""
        current = self.resource(id)
        if current is None:
            raise KeyError(id)
        with self._cond:
            resource = self.resources.get(id, current)
            if status is not None:
                resource["status"] = full_resource_status(status)
                if resource["status"] != RESOURCE_PREFIX + "PENDING":
                    resource["status_details"] = {}
                if resource["status"] != RESOURCE_PREFIX + "READY":
                    resource.pop("expires_at", None)
            if queue_position is not None:
                resource["status_details"] = {"queue_position": queue_position}
            if expires_at is not None:
                resource["expires_at"] = (
                    _iso(expires_at) if isinstance(expires_at, datetime) else expires_at
                )
            resource["updated_at"] = _iso(datetime.now(UTC))
            resource.update(fields)
            self.resources[id] = resource
            self._cond.notify_all()
            return copy.deepcopy(resource)

    def put(self, session: dict[str, Any]) -> None:
        with self._cond:
            self.sessions[str(session["id"])] = copy.deepcopy(session)
            self._order.setdefault(str(session["id"]), len(self._order))
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
                session["error"] = session_error(now)
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
            self.key_checks.clear()
            self.paths.clear()
            self.auth_headers.clear()
            self.stop_requests.clear()
            self.resource_stop_requests.clear()
            self.estimate_requests.clear()
            self.extend_requests.clear()
            self.download_requests.clear()
            self._counts.clear()
            self.handler_errors.clear()
            self.max_in_flight = self.in_flight

    def wait_for_requests(self, id: str | None, count: int, timeout: float = 20.0) -> int:
        """Block until `requests_for(id)` (or total, for None) reaches `count`."""
        return self.wait_for(self._reached(id, count), timeout, message=f"{count} requests")

    async def wait_for_requests_async(
        self,
        id: str | None,
        count: int,
        timeout: float = 20.0,  # noqa: ASYNC109
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
        matching: str | None = None,
        route: str | None = None,
        after: bool = False,
    ) -> TogetherFault:
        """Script a fault for one session id (or every request, for None).

        - `status` only: that status with a Together-style JSON error body.
        - `body`: that raw body (status defaults to 200), e.g. HTML or `[1,2]`.
        - `delay`: sleep first (a hang past the client timeout); with no status/body the normal
          response follows.
        - `disconnect`: close the connection without answering.
        - `times`: how many requests it applies to (None: until `clear_faults`).
        - `matching`: only requests whose target (path and query) contains this text,
          e.g. `after=<cursor>` to fail one page of a list.
        - `route`: only requests of that route (`get`, `stop`, `resource`, `resource_stop`, ...).
        - `after`: serve the request first (a stop takes effect), then answer with the fault:
          its `status`/`body` replace the answer, `delay` holds it back, `disconnect` drops it.
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
            matching=matching,
            route=route,
            after=after,
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

    def _take_fault(
        self, session_id: str | None, route: str, target: str = "", *, after: bool = False
    ) -> TogetherFault | None:
        with self._lock:
            usable = [
                f
                for f in self._faults
                if f.after == after
                # A fault for every route is not one for the start-up check.
                and (f.route == route if route == "key_check" else f.route in (None, route))
                and (f.matching is None or f.matching in target)
            ]
            candidates = [f for f in usable if f.session_id == session_id and session_id]
            candidates += [f for f in usable if f.session_id is None]
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
        served = self._serve(request, route, session_id, auth)
        late = self._take_fault(session_id, route, request.target, after=True)
        if late is not None:
            return self._faulted(late) or served
        return served

    def _faulted(self, fault: TogetherFault) -> Response | None:
        """A fault's answer; None when it only delays the real one."""
        if fault.delay:
            self.sleep(fault.delay)
        if fault.disconnect:
            return Response(disconnect=True)
        if fault.status is None and fault.body is None:
            return None
        status = 200 if fault.status is None else fault.status
        if fault.body is not None:
            body = fault.body.encode()
        else:
            body = json.dumps(_fault_error(status)).encode()
        return Response(
            status=status, body=body, content_type=fault.content_type, headers=dict(fault.headers)
        )

    def _serve(
        self, request: Request, route: str, session_id: str | None, auth: str | None
    ) -> Response:
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

    def _estimate(self, raw: bytes) -> Response:
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("base_model"), str):
            return Response.json(
                error_body("base_model is required", "invalid_parameter", param="base_model"),
                status=400,
            )
        config = body.get("compute_config")
        if not isinstance(config, dict):
            config = {}
        gpu = config.get("gpu_type") or "H100-80GB"
        replicas = config.get("num_generator_replicas", 1)
        if gpu not in self.prices or not isinstance(replicas, int) or replicas < 0:
            return Response.json(
                error_body("Invalid compute_config", "invalid_parameter", param="compute_config"),
                status=400,
            )
        with self._lock:
            self.estimate_requests.append(body)
            price = self.prices[gpu] * (1 + replicas)
        return Response.json({"currency": "USD", "price_per_hour": round(price, 4)})

    def _stop_resource(self, resource_id: str, raw: bytes, query: dict[str, list[str]]) -> Response:
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        flag = body.get("force") if isinstance(body, dict) else None
        if not isinstance(flag, bool):
            flag = (_one(query, "force") or "false").lower() == "true"
        if self.resource(resource_id) is None:
            return Response.json(error_body("Model resource not found", "not_found"), status=404)
        with self._cond:
            attached = [
                s
                for s in self.sessions.values()
                if s.get("model_resources_id") == resource_id and s.get("status") in _ACTIVE
            ]
            if attached and not flag:
                return Response.json(
                    error_body(
                        f"{len(attached)} training session(s) are still active on this "
                        "model resource; stop them first or pass force=true",
                        "failed_precondition",
                    ),
                    status=400,
                )
            self.resource_stop_requests.append((resource_id, flag))
        for session in attached:
            self.set_status(str(session["id"]), "STOPPING")
        return Response.json(self.set_resource(resource_id, "STOPPING"))

    def _list_sessions(self, query: dict[str, list[str]], target: str = "") -> Response:
        statuses = _statuses(query, full_status, LISTABLE_STATUSES)
        if isinstance(statuses, Response):
            return statuses
        creator = _one(query, "created_by")
        if creator == "me":
            creator = self.key_owner
        resource_id = _one(query, "model_resources_id")
        after = _one(query, "after") or ""
        if self.endless_list and after.startswith(ENDLESS_CURSOR):
            response = self._endless_page(after, statuses)
            if self.on_list_page is not None:
                self.on_list_page(target)
            return response
        with self._lock:
            # Only the page is copied: a pass over thousands of sessions must not cost
            # this server a copy of all of them per page.
            items = [
                s
                for s in self.sessions.values()
                if (not statuses or s.get("status") in statuses)
                and (creator is None or s.get("created_by") == creator)
                and (resource_id is None or s.get("model_resources_id") == resource_id)
            ]
            order = dict(self._order)
            items.sort(key=lambda s: order.get(str(s["id"]), 0))
            response = _page(
                items, query, position=order.get, endless=self.endless_list, most=self.page_rows
            )
        hook = self.on_list_page
        if hook is not None:
            hook(target)
        return response

    def _endless_page(self, after: str, statuses: set[str]) -> Response:
        """A page past the end of an endless list: one made-up session of the first
        status asked for, and a fresh cursor."""
        try:
            n = int(after[len(ENDLESS_CURSOR) :]) + 1
        except ValueError:
            n = 0
        status = min(statuses) if statuses else STATUS_PREFIX + "RUNNING"
        made_up = make_session(_uid("endless", str(n)), status, checkpoints=0)
        cursor = f"{ENDLESS_CURSOR}{n}"
        return Response.json(
            {"data": [made_up], "meta": {"has_more": True, "limit": 100, "next_cursor": cursor}}
        )

    def _list_resources(self, query: dict[str, list[str]]) -> Response:
        allowed = frozenset(RESOURCE_PREFIX + s for s in RESOURCE_STATUSES)
        statuses = _statuses(query, full_resource_status, allowed)
        if isinstance(statuses, Response):
            return statuses
        creator = _one(query, "created_by")
        if creator == "me":
            creator = self.key_owner
        with self._lock:
            # Encoded under the lock, so no copy of thousands of resources a page.
            items = [
                r
                for r in self.resources.values()
                if (not statuses or r.get("status") in statuses)
                and (creator is None or r.get("created_by") == creator)
            ]
            return _page(items, query, most=self.page_rows)


def _one(query: dict[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[-1] if values and values[-1] else None


def _statuses(
    query: dict[str, list[str]], full: Callable[[str], str], allowed: frozenset[str]
) -> set[str] | Response:
    """`status[]=A&status[]=B` (brackets), `status=A` or `status=A,B` (the SDK's comma form)."""
    raw = query.get("status[]", []) + query.get("status", [])
    wanted = {full(part.strip()) for value in raw for part in value.split(",") if part.strip()}
    unknown = sorted(wanted - allowed)
    if unknown:
        return Response.json(
            error_body(f"Invalid status filter: {unknown[0]}", "invalid_parameter", param="status"),
            status=400,
        )
    return wanted


def _page(
    items: list[dict[str, Any]],
    query: dict[str, list[str]],
    position: Callable[[str], int | None] | None = None,
    endless: bool = False,
    most: int | None = None,
) -> Response:
    """One cursor page: `after` is the id of the previous page's last item. With
    `position` (sessions) the page starts after that item's place in list order,
    whether or not it is still listed; without, after the item itself. `endless`:
    the last page says there is more, under a made-up cursor. `most`: the rows a
    page holds at most, below `limit` (which `meta` still echoes)."""
    try:
        limit = max(1, min(100, int(_one(query, "limit") or 100)))
    except ValueError:
        return Response.json(
            error_body("Invalid limit", "invalid_parameter", param="limit"), status=400
        )
    after = _one(query, "after")
    if after and position is not None:
        start = position(after)
        items = (
            [i for i in items if (position(str(i["id"])) or 0) > start] if start is not None else []
        )
    elif after:
        ids = [item["id"] for item in items]
        items = items[ids.index(after) + 1 :] if after in ids else []
    page = items[: min(limit, most or limit)]
    has_more = len(items) > len(page)
    cursor = str(page[-1]["id"]) if page and has_more else ""
    if endless and not has_more:
        has_more, cursor = True, f"{ENDLESS_CURSOR}0"
    return Response.json(
        {"data": page, "meta": {"has_more": has_more, "limit": limit, "next_cursor": cursor}}
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
