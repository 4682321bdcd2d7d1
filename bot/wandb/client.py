"""W&B's public GraphQL API as the bot reads it: `WandbClient`.

Over the bot's own `httpx.AsyncClient` (not the heavy `wandb` package), with the
same guards as Together's client: one deadline for the whole exchange, a byte
cap on the answer, no redirects (the key goes only to `WANDB_BASE_URL`), and
its own per-minute budget (`WANDB_REQUESTS_PER_MINUTE`): a request over it is
refused before it is sent, so a burst of clicks cannot hammer W&B. The query
text is what the `wandb` SDK sends for `Run.history(keys=…, samples=…)`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable, Sequence

import httpx

from bot.wandb.errors import WandbError
from bot.wandb.history import MAX_POINTS, Series, history_of, summary_of
from bot.wandb.runs import RunRef

HISTORY_QUERY = """
query RunSampledHistory($project: String!, $entity: String!, $name: String!, $specs: [JSONString!]!) {
    project(name: $project, entityName: $entity) {
        run(name: $name) { sampledHistory(specs: $specs) }
    }
}
"""
CARD_QUERY = """
query RunSummarySampledHistory($project: String!, $entity: String!, $name: String!, $specs: [JSONString!]!) {
    project(name: $project, entityName: $entity) {
        run(name: $name) { summaryMetrics sampledHistory(specs: $specs) }
    }
}
"""
MAX_RESPONSE_BYTES = 4 << 20

Observer = Callable[[str, float], None]


class Budget:
    """Requests sent in the last minute; a request beyond `per_minute` is refused."""

    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._sent: deque[float] = deque()

    def take(self) -> bool:
        now = self._clock()
        while self._sent and self._sent[0] <= now - 60.0:
            self._sent.popleft()
        if len(self._sent) >= self.per_minute:
            return False
        self._sent.append(now)
        return True


class WandbClient:
    """Sampled history and summaries of W&B runs."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: str,
        timeout: float = 10.0,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        per_minute: float = 60.0,
        observe: Observer | None = None,
    ) -> None:
        self._http = http
        self._url = base_url.rstrip("/") + "/graphql"
        self._key = api_key
        self._timeout = timeout
        self._max_bytes = max_response_bytes
        self.budget = Budget(per_minute)
        self._observe = observe

    async def history(
        self, run: RunRef, metrics: Sequence[str], *, samples: int = MAX_POINTS
    ) -> dict[str, Series]:
        """Each metric's sampled history: one spec per metric, so rows where another
        metric is missing do not hide this one."""
        data = await self._query(HISTORY_QUERY, run, _specs(metrics, samples))
        return history_of(metrics, _run(data, run).get("sampledHistory"))

    async def card(
        self, run: RunRef, metrics: Sequence[str], *, samples: int = 100
    ) -> tuple[dict[str, float], dict[str, Series]]:
        """The latest value of each metric (`summaryMetrics`) and a sample of its
        points, in one request: what a root card shows, and where a metric first
        went NaN (within the sample's spacing)."""
        data = await self._query(CARD_QUERY, run, _specs(metrics, samples, timed=True))
        found = _run(data, run)
        return (
            summary_of(metrics, found.get("summaryMetrics")),
            history_of(metrics, found.get("sampledHistory")),
        )

    async def _query(self, query: str, run: RunRef, specs: list[str]) -> dict[str, object]:
        if not self.budget.take():
            if self._observe is not None:
                self._observe("budget", 0.0)
            raise WandbError("budget")
        body: dict[str, object] = {
            "query": query,
            "variables": {
                "project": run.project,
                "entity": run.entity,
                "name": run.run_id,
                "specs": specs,
            },
        }
        started = time.monotonic()
        label = "error"
        try:
            async with asyncio.timeout(self._timeout):
                status, content = await self._post(body)
            label = str(status)
        except TimeoutError as exc:
            label = "timeout"
            raise WandbError("unreachable", "timed out") from exc
        except httpx.HTTPError as exc:
            raise WandbError("unreachable", type(exc).__name__) from exc
        finally:
            if self._observe is not None:
                self._observe(label, time.monotonic() - started)
        return await asyncio.to_thread(_decode, status, content)

    async def _post(self, body: dict[str, object]) -> tuple[int, bytes]:
        async with self._http.stream(
            "POST",
            self._url,
            json=body,
            auth=("api", self._key),
            headers={"Accept": "application/json"},
            timeout=self._timeout,
            follow_redirects=False,
        ) as streamed:
            received = bytearray()
            async for chunk in streamed.aiter_bytes():
                received += chunk
                if len(received) > self._max_bytes:
                    raise WandbError("bad_response", f"answer larger than {self._max_bytes} bytes")
            return streamed.status_code, bytes(received)


def _specs(metrics: Sequence[str], samples: int, *, timed: bool = False) -> list[str]:
    """One spec per metric; `timed` asks for `_timestamp` too (W&B logs it with
    every row), which times a rule's crossing from when the run logged it."""
    keys = ["_step", "_timestamp"] if timed else ["_step"]
    return [json.dumps({"keys": [*keys, m], "samples": samples}) for m in metrics]


def _decode(status: int, content: bytes) -> dict[str, object]:
    """The `data` of an answer, or the `WandbError` it means."""
    if status in (401, 403):
        raise WandbError("auth", status=status)
    if status >= 300:
        if status >= 500 or status == 429:
            raise WandbError("unreachable", f"HTTP {status}", status=status)
        raise WandbError("bad_response", f"HTTP {status}", status=status)
    try:
        answer = json.loads(content)
    except (ValueError, RecursionError) as exc:  # also too deep, or a 5,000-digit number
        raise WandbError("bad_response", "not JSON", status=status) from exc
    if not isinstance(answer, dict):
        raise WandbError("bad_response", "not an object", status=status)
    errors = answer.get("errors")
    if errors:
        first = errors[0] if isinstance(errors, list) and errors else {}
        message = first.get("message") if isinstance(first, dict) else None
        raise WandbError("graphql", str(message or "an error"), status=status)
    data = answer.get("data")
    if not isinstance(data, dict):
        raise WandbError("bad_response", "no data", status=status)
    return data


def _run(data: dict[str, object], run: RunRef) -> dict[str, object]:
    project = data.get("project")
    if not isinstance(project, dict):
        raise WandbError("not_found", f"no project {run.entity}/{run.project}")
    found = project.get("run")
    if not isinstance(found, dict):
        raise WandbError("not_found", f"no run {run.path}")
    return found
