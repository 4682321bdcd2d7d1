"""Scenario 2b, in-process: `bot.poll.cycle.poll_cycle` on the bot's own runtime (engine,
httpx client, Together client), with a SQLAlchemy `before_cursor_execute` listener counting
every statement sent to the database, and the cycle split into claim / fetch / write phases.

Run at two subscription counts (1 and 5 channels per session): the count must not change.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event

from bench.env import database, make_due, seed
from bench.scenarios import Sizes
from bot.poll import cycle as poller
from bot.poll import isolate
from bot.runtime import build_runtime
from bot.settings.model import Settings
from bot.simulated import FakeTogether
from bot.store.session import Sessionmaker
from bot.together.client import TogetherClient


@dataclass(frozen=True)
class _BenchDeps:
    """The runtime's parts the poll cycle uses, under the bench's own replica name."""

    sessionmaker: Sessionmaker
    together: TogetherClient
    settings: Settings
    owner: str


class StatementCounter:
    def __init__(self) -> None:
        self.total = 0
        self.executemany = 0
        self.kinds: Counter[str] = Counter()

    def __call__(
        self, conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool
    ) -> None:
        self.total += 1
        self.executemany += int(many)
        self.kinds[statement.lstrip().split(None, 1)[0].upper()] += 1

    def reset(self) -> dict[str, Any]:
        out = {"statements": self.total, "executemany": self.executemany, **dict(self.kinds)}
        self.total, self.executemany = 0, 0
        self.kinds.clear()
        return out


class Phases:
    """Wraps the poller's claim / fetch / write steps (module globals, where they are
    called from) with timers."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self._saved: dict[tuple[Any, str], Any] = {}

    def __enter__(self) -> Phases:
        for module, name, label in (
            (poller, "claim_due_sessions", "claim"),
            (poller, "learn", "fetch"),  # GETs or list pages, with the writes they overlap
            (isolate, "record_outcomes", "write"),
        ):
            original = getattr(module, name)
            self._saved[module, name] = original
            setattr(module, name, self._timed(original, label))
        return self

    def __exit__(self, *exc: object) -> None:
        for (module, name), original in self._saved.items():
            setattr(module, name, original)

    def _timed(self, fn: Any, label: str) -> Any:
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - started

        return wrapper

    def reset(self) -> dict[str, float]:
        out = {f"{k}_s": round(v, 3) for k, v in self.seconds.items()}
        self.seconds.clear()
        return out


def _settings(url: str, together: FakeTogether, sizes: Sizes) -> Settings:
    return Settings(
        _env_file=None,
        database_url=url,
        together_api_key=together.api_key,
        together_base_url=together.base_url,
        together_max_rps=10000,
        together_timeout_seconds=10,
        slack_bot_token="xoxb-bench",
        poll_interval_seconds=sizes.poll_interval,
        poll_concurrency=sizes.poll_concurrency,
        poll_batch_size=max(5000, sizes.stmt_sessions),
        oncall_channel="COPS",
        # the poll's own statements: with a budget, the gate's books add a
        # transaction per grant, as many as the grants the timing makes (by
        # sessions, never by subscriptions)
        together_requests_per_minute=0,
    )


async def _cycles(url: str, together: FakeTogether, sizes: Sizes, ids: list[str]) -> dict:
    rt = build_runtime(_settings(url, together, sizes))
    counter = StatementCounter()
    event.listen(rt.engine.sync_engine, "before_cursor_execute", counter)
    out: dict[str, Any] = {}
    try:
        with Phases() as phases:
            for name in ("steady", "transitions"):
                if name == "transitions":
                    # every kind of change at once: a status change, an error (on-call
                    # alert) and a session gone (404, subscriptions ended)
                    for i, sid in enumerate(ids):
                        if i % 4 == 0:
                            together.remove(sid)
                        elif i % 4 == 1:
                            together.set_status(sid, "ERROR")
                        else:
                            together.set_status(sid, "STOPPING")
                    await asyncio.to_thread(make_due, url)
                counter.reset()
                phases.reset()
                result = await poller.poll_cycle(
                    _BenchDeps(rt.sessionmaker, rt.together, rt.settings, owner="bench")
                )
                out[name] = {
                    "claimed": result.claimed,
                    "transitions": result.transitions,
                    "outbox_rows": result.outbox_rows,
                    "cycle_s": round(result.seconds, 3),
                    **phases.reset(),
                    **counter.reset(),
                }
    finally:
        await rt.aclose()
    return out


def statements(backend: str, sizes: Sizes) -> dict[str, Any]:
    """Statements per cycle at two subscription counts, Together answering at once."""
    runs: dict[int, dict[str, Any]] = {}
    for channels in sizes.stmt_channels:
        with database(backend) as db, FakeTogether() as together:
            ids = seed(
                db.url, together, sessions=sizes.stmt_sessions, channels_per_session=channels
            )
            make_due(db.url)
            runs[channels] = asyncio.run(_cycles(db.url, together, sizes, ids))
    small, large = (runs[c] for c in sizes.stmt_channels)
    same = all(small[k]["statements"] == large[k]["statements"] for k in ("steady", "transitions"))
    out: dict[str, Any] = {"sessions": sizes.stmt_sessions}
    for channels, run in runs.items():
        subs = sizes.stmt_sessions * channels
        for phase, numbers in run.items():
            for key, value in numbers.items():
                out[f"{phase}_{subs}subs_{key}"] = value
    out["statements_constant_in_subscriptions"] = same
    out["target"] = "DB statements per cycle O(1) in subscriptions (same at both counts)"
    out["target_met"] = same
    return out
