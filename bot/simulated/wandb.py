"""`FakeWandb`: a Weights & Biases-shaped GraphQL server on 127.0.0.1.

It answers `POST /graphql` the way W&B's public API does for the queries the
bot (and the `wandb` SDK's `Run.history(keys=…, samples=…)`) sends:

- HTTP Basic auth, user `api`, password the API key; another key gets 401.
- The query text is checked: only the operations in `QUERIES` (whitespace
  aside) are known; anything else is a GraphQL `errors` answer, as a schema
  validation failure would be.
- Variables are checked like GraphQL would: `$project`, `$entity`, `$name`
  strings, `$specs` a list of JSON **strings** (`[JSONString!]!`), each an
  object with a `keys` list and an integer `samples`.
- Answers have W&B's shapes: `{"data": {"project": {"run": {...}}}}`, a
  `null` project or run when unknown, one list of rows per spec, `_step` as
  logged (a float if it was one), every row with its `_timestamp` (a row given
  none is timed when first served), and non-finite numbers as the strings
  `"NaN"`, `"Infinity"`, `"-Infinity"`. `summaryMetrics` is a JSON string
  (with bare `NaN` tokens, as W&B writes it).

Every request is recorded (`calls`), and `fail_next` scripts a failure.
"""

from __future__ import annotations

import base64
import json
import math
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ._http import FakeHTTPServer, Request, Response

__all__ = ["QUERIES", "FakeRun", "FakeWandb", "WandbCall"]

#: the operations the server knows, by name: the text the `wandb` SDK sends for
#: `Run.history(keys=…)` (wandb/apis/public/runs.py, `_sampled_history`), and the
#: bot's card read (the same run object, with `summaryMetrics` beside it)
QUERIES: dict[str, str] = {
    "RunSampledHistory": """
        query RunSampledHistory($project: String!, $entity: String!, $name: String!, $specs: [JSONString!]!) {
            project(name: $project, entityName: $entity) {
                run(name: $name) { sampledHistory(specs: $specs) }
            }
        }
    """,
    "RunSummarySampledHistory": """
        query RunSummarySampledHistory($project: String!, $entity: String!, $name: String!, $specs: [JSONString!]!) {
            project(name: $project, entityName: $entity) {
                run(name: $name) { summaryMetrics sampledHistory(specs: $specs) }
            }
        }
    """,
}


def normalized(query: str) -> str:
    """A query's text with whitespace folded, so formatting does not matter."""
    text = re.sub(r"\s+", " ", query).strip()
    return re.sub(r"\s*([{}():,!\[\]])\s*", r"\1", text)


_KNOWN = {normalized(q): name for name, q in QUERIES.items()}


def _wire(value: Any) -> Any:
    """A value as W&B sends it: non-finite floats as their names."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


@dataclass
class FakeRun:
    """One run: its history rows as logged, and its summary."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    #: a dict (dumped with bare NaN tokens) or a raw string sent as is
    summary: dict[str, Any] | str | None = None
    state: str = "running"
    #: the whole answer to a read of this run, sent as is instead of its data (an
    #: answer no JSON reader takes: nested too deep, a number of 5,000 digits)
    answer_text: str | None = None

    def summary_text(self) -> str:
        if isinstance(self.summary, str):
            return self.summary
        if self.summary is not None:
            return json.dumps(self.summary)
        latest: dict[str, Any] = {}
        for row in self.rows:
            latest.update(row)
        return json.dumps(latest)


@dataclass
class WandbCall:
    """One request: its auth, operation and variables, and how it was answered."""

    authorization: str | None
    operation: str | None
    variables: dict[str, Any]
    status: int
    answer: dict[str, Any] | None

    @property
    def specs(self) -> list[dict[str, Any]]:
        specs = self.variables.get("specs") or []
        return [json.loads(s) for s in specs if isinstance(s, str)]


@dataclass
class _Fault:
    status: int = 200
    body: dict[str, Any] | None = None
    text: str | None = None
    disconnect: bool = False
    delay: float = 0.0
    remaining: int = 1


class FakeWandb(FakeHTTPServer):
    """A W&B GraphQL double; `runs` is keyed by (entity, project, run id)."""

    def __init__(self, *, api_key: str = "wandb-test-key", port: int = 0) -> None:
        super().__init__(port=port)
        self.api_key = api_key
        self.runs: dict[tuple[str, str, str], FakeRun] = {}
        self.projects: set[tuple[str, str]] = set()
        self.calls: list[WandbCall] = []
        self._faults: deque[_Fault] = deque()

    # -- scripting ---------------------------------------------------------------------------

    def add_run(self, entity: str, project: str, run_id: str, run: FakeRun) -> FakeRun:
        with self._lock:
            self.runs[(entity, project, run_id)] = run
            self.projects.add((entity, project))
        return run

    def fail_next(
        self,
        *,
        status: int = 200,
        errors: list[str] | None = None,
        text: str | None = None,
        disconnect: bool = False,
        delay: float = 0.0,
        times: int = 1,
    ) -> None:
        """The next `times` requests fail: an HTTP status (with `text`), a GraphQL
        `errors` answer (HTTP 200, `data: null`), a dropped connection, or a delay."""
        body = {"errors": [{"message": m} for m in errors], "data": None} if errors else None
        with self._lock:
            self._faults.append(
                _Fault(status, body, text, disconnect, delay, remaining=max(1, times))
            )

    def reset(self) -> None:
        """Forget the calls and faults, once no request is being answered: a delayed
        answer to the test before (its client gave up) would land in this one's calls."""
        with self._cond:
            self._cond.wait_for(lambda: self.in_flight == 0, timeout=10)
            self.calls.clear()
            self._faults.clear()

    def history_calls(self) -> list[WandbCall]:
        with self._lock:
            return [c for c in self.calls if c.answer is not None and "data" in c.answer]

    # -- serving -----------------------------------------------------------------------------

    def _handle(self, request: Request) -> Response:
        fault = self._take_fault()
        if fault is not None and fault.delay:
            self.sleep(fault.delay)
        if fault is not None and fault.disconnect:
            return Response(disconnect=True)
        auth = request.headers.get("authorization")
        operation: str | None = None
        variables: dict[str, Any] = {}
        try:
            body = json.loads(request.body or b"{}")
        except ValueError:
            body = None
        if isinstance(body, dict):
            operation = _KNOWN.get(normalized(str(body.get("query") or "")))
            given = body.get("variables")
            variables = given if isinstance(given, dict) else {}
        status, answer, text = self._answer(request, auth, body, operation, variables, fault)
        with self._cond:
            self.calls.append(WandbCall(auth, operation, variables, status, answer))
            self._cond.notify_all()
        if text is not None:
            return Response.text(text, status=status)
        return Response.json(answer, status=status)

    def _take_fault(self) -> _Fault | None:
        with self._lock:
            if not self._faults:
                return None
            fault = self._faults[0]
            fault.remaining -= 1
            if fault.remaining <= 0:
                self._faults.popleft()
            return fault

    def _answer(
        self,
        request: Request,
        auth: str | None,
        body: Any,
        operation: str | None,
        variables: dict[str, Any],
        fault: _Fault | None,
    ) -> tuple[int, dict[str, Any] | None, str | None]:
        if request.method != "POST" or request.path != "/graphql":
            return 404, None, "404 page not found"
        if auth != "Basic " + base64.b64encode(f"api:{self.api_key}".encode()).decode():
            return 401, None, '{"errors":[{"message":"user is not logged in"}]}'
        if fault is not None and (fault.status != 200 or fault.text is not None):
            return fault.status, None, fault.text or "server error"
        if fault is not None and fault.body is not None:
            return 200, fault.body, None
        if not isinstance(body, dict) or operation is None:
            return 200, _errors("Cannot query: unknown operation or field"), None
        problem = _check_variables(variables)
        if problem:
            return 200, _errors(problem), None
        with self._lock:
            key = (variables.get("entity"), variables.get("project"), variables.get("name"))
            run = self.runs.get(key)  # type: ignore[arg-type]
        if run is not None and run.answer_text is not None:
            return 200, None, run.answer_text
        return 200, {"data": self._data(operation, variables)}, None

    def _data(self, operation: str, variables: dict[str, Any]) -> dict[str, Any]:
        entity, project, name = variables["entity"], variables["project"], variables["name"]
        with self._lock:
            if (entity, project) not in self.projects:
                return {"project": None}
            run = self.runs.get((entity, project, name))
            if run is None:
                return {"project": {"run": None}}
            for row in run.rows:  # W&B times every row it logs; a row given none is timed now
                if isinstance(row, dict):
                    row.setdefault("_timestamp", time.time())
            rows = [dict(r) for r in run.rows]
            summary = run.summary_text()
        specs = [json.loads(s) for s in variables["specs"]]
        answer: dict[str, Any] = {"sampledHistory": [_sample(rows, spec) for spec in specs]}
        if operation == "RunSummarySampledHistory":
            answer["summaryMetrics"] = summary
        return {"project": {"run": answer}}


def _errors(message: str) -> dict[str, Any]:
    return {"errors": [{"message": message, "locations": [{"line": 1, "column": 1}]}], "data": None}


def _check_variables(variables: dict[str, Any]) -> str | None:
    for name in ("project", "entity", "name"):
        if not isinstance(variables.get(name), str):
            return f'Variable "${name}" of required type "String!" was not provided.'
    specs = variables.get("specs")
    if not isinstance(specs, list) or not specs:
        return 'Variable "$specs" of required type "[JSONString!]!" was not provided.'
    for spec in specs:
        if not isinstance(spec, str):  # a spec sent as an object, not a JSON string
            return 'Variable "$specs" got invalid value; Expected type JSONString.'
        try:
            parsed = json.loads(spec)
        except ValueError:
            return 'Variable "$specs" got invalid value; invalid JSON.'
        keys = parsed.get("keys") if isinstance(parsed, dict) else None
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            return "invalid spec: keys must be a list of strings"
        if not isinstance(parsed.get("samples", 500), int):
            return "invalid spec: samples must be an integer"
    return None


def _sample(rows: list[dict[str, Any]], spec: dict[str, Any]) -> list[dict[str, Any]]:
    """W&B's sampling as the bot relies on it: rows holding every key of the spec
    (and `_step` within minStep..maxStep), at most `samples`, in step order."""
    keys = [k for k in spec["keys"]]
    samples = max(1, int(spec.get("samples", 500)))
    low, high = spec.get("minStep"), spec.get("maxStep")
    kept = []
    for row in rows:
        if not all(k in row for k in keys):
            continue
        step = row.get("_step")
        numeric = isinstance(step, int | float) and not isinstance(step, bool)
        if numeric and ((low is not None and step < low) or (high is not None and step > high)):
            continue
        kept.append({k: _wire(row[k]) for k in keys})
    if len(kept) > samples:
        stride = len(kept) / samples
        kept = [kept[int(i * stride)] for i in range(samples)]
    return kept
