"""Faults scripted on the Together-shaped server (`fail`): a status, an odd body, a
delay or a dropped connection, for one session, one route or one page, before the
request is served or after (its effect happened, its answer did not)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ._http import FakeHTTPServer, Response
from .together_shapes import error_body

__all__ = ["TogetherFault", "TogetherFaults"]


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


class TogetherFaults(FakeHTTPServer):
    """`fail`, `clear_faults`, and picking and answering the fault a request takes."""

    _faults: list[TogetherFault]

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
