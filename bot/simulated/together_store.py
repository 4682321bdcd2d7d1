"""The Together-shaped server's state: the sessions and model resources it holds,
the requests it was sent, and the calls a test uses to seed, change and count them.
`FakeTogether` (in `together`) adds the routes that serve this state."""

from __future__ import annotations

import copy
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ._http import WAIT_SECONDS, FakeHTTPServer
from .together_faults import TogetherFault
from .together_shapes import (
    DEFAULT_PRICES,
    KEY_OWNER,
    RESOURCE_PREFIX,
    STATUS_PREFIX,
    _iso,
    _parse_iso,
    full_resource_status,
    full_status,
    make_model_resource,
    make_old_shape_session,
    make_session,
    session_error,
)

__all__ = ["TogetherRequest", "TogetherStore"]


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


class TogetherStore(FakeHTTPServer):
    """The sessions, resources and recorded requests; all state access is thread-safe."""

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
        #: the session list never ends (see `bot.simulated.together`)
        self.endless_list = False
        #: a RUNNING session's step moves this much each time it is read (a GET of it,
        #: or a list request that matches it): training that never stands still
        self.steps_per_read = 0
        #: at most this many rows a list page, whatever `limit` asks (None: `limit`);
        #: a server may send fewer rows than asked, and the SDK's pagination allows it
        self.page_rows: int | None = None
        self.resources: dict[str, dict[str, Any]] = {}
        self.requests: list[TogetherRequest] = []
        #: the bot's start-up checks of its key (see `bot.simulated.together`)
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
        #: what each signature was handed out for: (checkpoint id, file name)
        self.download_signed: dict[str, tuple[str, str]] = {}
        #: JSON bodies POSTed to estimate-cost, in order
        self.estimate_requests: list[dict[str, Any]] = []
        #: estimate-cost's price per hour per GPU group, by GPU type
        self.prices: dict[str, float] = dict(DEFAULT_PRICES)
        #: estimate-cost's currency by GPU type (USD when not named)
        self.currencies: dict[str, str] = {}
        #: extra latency for one session's requests, added to `latency`
        self.session_latency: dict[str, float] = {}
        self._counts: Counter[str] = Counter()
        self._faults: list[TogetherFault] = []
        #: placeholder string -> the raw JSON text sent in its place (`raw_json`)
        self._raw: dict[str, str] = {}

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

    def raw_json(self, text: str) -> str:
        """A value for a session field that is sent as the JSON text `text`, as is:
        what Python cannot hold or dump (an integer of 5,000 digits, arrays nested
        1,000 deep) but a server may well send. Returns the placeholder to store."""
        with self._lock:
            token = f"raw-json-{len(self._raw)}-{uuid.uuid4().hex}"
            self._raw[token] = text
        return token

    def put(self, session: dict[str, Any]) -> None:
        with self._cond:
            self.sessions[str(session["id"])] = copy.deepcopy(session)
            self._order.setdefault(str(session["id"]), len(self._order))
            self._cond.notify_all()

    def _advance(self, session: dict[str, Any]) -> None:
        """Move a RUNNING session's step on by `steps_per_read` (held under the lock)."""
        if not self.steps_per_read or session.get("status") != STATUS_PREFIX + "RUNNING":
            return
        try:
            step = str(int(str(session.get("step") or 0)) + self.steps_per_read)
        except ValueError:
            return
        session["step"] = step
        policy = session.get("policy_state")
        if isinstance(policy, dict):
            policy.update(applied_weights_version=step, target_weights_version=step)
            policy["trainer_step"] = step

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

    def wait_for_requests(self, id: str | None, count: int, timeout: float = WAIT_SECONDS) -> int:
        """Block until `requests_for(id)` (or total, for None) reaches `count`."""
        return self.wait_for(self._reached(id, count), timeout, message=f"{count} requests")

    async def wait_for_requests_async(
        self,
        id: str | None,
        count: int,
        timeout: float = WAIT_SECONDS,  # noqa: ASYNC109
    ) -> int:
        return await self.wait_for_async(
            self._reached(id, count), timeout, message=f"{count} requests"
        )

    def _reached(self, id: str | None, count: int) -> Callable[[], int | None]:
        def predicate() -> int | None:
            n = self.total_requests if id is None else self.requests_for(id)
            return n if n >= count else None

        return predicate
