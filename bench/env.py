"""Plumbing: databases per backend, bulk seeding, the bot process, /proc readings."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `tests.support` lives at the repo root
    sys.path.insert(0, str(REPO))

from sqlalchemy import insert, text, update  # noqa: E402

from bot.simulated import FakeSlack, FakeTogether, make_session  # noqa: E402
from bot.store.engine import make_engine  # noqa: E402
from bot.store.migrations import upgrade  # noqa: E402
from bot.store.tables import Subscription, WatchedSession, utcnow  # noqa: E402
from bot.training.sessions import TrainingSession  # noqa: E402
from bot.training.snapshots import seen_state  # noqa: E402
from tests.support import BotProcess, pg_admin, postgres_available  # noqa: E402

PG_BASE = os.environ.get("RLBOT_BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
RUNNING = "TRAINING_SESSION_STATUS_RUNNING"
FAR_FUTURE = datetime(2100, 1, 1)
CLK_TCK = os.sysconf("SC_CLK_TCK")
CYCLE_RE = re.compile(
    r"poll cycle: (\d+) sessions, (\d+) failed, (\d+) transitions in ([0-9.]+)\s*s"
)
DETAIL_RE = re.compile(
    r"poll cycle: \d+ sessions.*?\(plan (\w+): (\d+) list pages, (\d+) GETs"
    r"(?:, \d+ from the error watch's pages)?; next in ([0-9.]+)s\)"
)


def session_id(n: int) -> str:
    """Deterministic, valid session ids (UUIDs)."""
    return str(uuid.UUID(int=(0xBE7C << 112) + n))


def available_backends() -> list[str]:
    return ["sqlite", "postgresql"] if postgres_available(PG_BASE) else ["sqlite"]


@dataclass
class Database:
    backend: str
    url: str
    _cleanup: Any

    def drop(self) -> None:
        self._cleanup()


_counter = 0


def create_database(backend: str) -> Database:
    """A fresh, migrated database on `backend`."""
    global _counter
    _counter += 1
    if backend == "sqlite":
        folder = tempfile.mkdtemp(prefix="rlbot-bench-")
        url = f"sqlite:///{folder}/rl-bot.db"
        upgrade(url)
        return Database(backend, url, lambda: shutil.rmtree(folder, ignore_errors=True))
    if backend == "postgresql":
        name = f"rlbot_bench_{os.getpid()}_{_counter}"
        pg_admin(PG_BASE, f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"')
        url = f"{PG_BASE}/{name}"
        upgrade(url)

        def drop() -> None:
            pg_admin(PG_BASE, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

        return Database(backend, url, drop)
    raise ValueError(f"unknown backend {backend!r}")


@contextmanager
def database(backend: str) -> Iterator[Database]:
    db = create_database(backend)
    try:
        yield db
    finally:
        db.drop()


# -- seeding ------------------------------------------------------------------------------------


def _watch_row(sid: str, snapshot: dict[str, Any], *, due: datetime, active: bool) -> dict:
    """A watched_sessions row as the poller leaves it after seeing `snapshot`."""
    now = utcnow()
    session = TrainingSession.model_validate(snapshot)
    return {
        "session_id": sid,
        "active": active,
        **seen_state(session),
        "transition_seq": 0,
        "next_poll_at": due,
        "last_polled_at": None,
        "consecutive_failures": 0,
        "updated_at": now,
    }


def seed(
    url: str,
    together: FakeTogether,
    *,
    sessions: int,
    channels_per_session: int,
    channel_of: Any = None,
    due: datetime | None = None,
    terminal: int = 0,
) -> list[str]:
    """Bulk-insert watched sessions and subscriptions; put the same sessions in the fake.

    `channel_of(i, j)` names the channel of session i's j-th subscription
    (default: channel C<i+j>, so channels are shared between sessions). `terminal`
    extra sessions are stored inactive (ended): the poller must not fetch them.
    Returns the active session ids.
    """
    due = due or FAR_FUTURE
    channel_of = channel_of or (lambda i, j: f"C{(i + j) % max(sessions, 1):06d}")
    ids = [session_id(i) for i in range(sessions)]
    ended = [session_id(sessions + i) for i in range(terminal)]
    watch_rows: list[dict[str, Any]] = []
    sub_rows: list[dict[str, Any]] = []
    now = utcnow()
    for i, sid in enumerate(ids):
        snapshot = make_session(sid, RUNNING)
        together.put(snapshot)
        watch_rows.append(_watch_row(sid, snapshot, due=due, active=True))
        for j in range(channels_per_session):
            sub_rows.append(
                {
                    "team_id": "T1",
                    "channel_id": channel_of(i, j),
                    "session_id": sid,
                    "root_ts": f"{1600000000 + i}.{j:06d}",
                    "subscribed_by": "U1",
                    "created_at": now,
                    "active": True,
                }
            )
    for i, sid in enumerate(ended):
        snapshot = make_session(sid, "TRAINING_SESSION_STATUS_STOPPED")
        together.put(snapshot)
        watch_rows.append(_watch_row(sid, snapshot, due=due, active=False))
        sub_rows.append(
            {
                "team_id": "T1",
                "channel_id": channel_of(i, 0),
                "session_id": sid,
                "root_ts": f"{1650000000 + i}.000001",
                "subscribed_by": "U1",
                "created_at": now,
                "active": False,
            }
        )

    async def go() -> None:
        engine = make_engine(url)
        try:
            async with engine.begin() as conn:
                for chunk in _chunks(watch_rows, 1000):
                    await conn.execute(insert(WatchedSession.__table__), chunk)
                for chunk in _chunks(sub_rows, 5000):
                    await conn.execute(insert(Subscription.__table__), chunk)
        finally:
            await engine.dispose()

    asyncio.run(go())
    return ids


def add_unwatched(together: FakeTogether, n: int) -> None:
    """`n` more live sessions in the project that nobody watches."""
    for i in range(n):
        together.put(make_session(session_id(1_000_000 + i), RUNNING, checkpoints=0))


def _chunks(rows: list[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def make_due(url: str, *, seconds_ago: float = 1.0) -> None:
    """Every active watched session due now (next_poll_at in the past)."""

    async def go() -> None:
        engine = make_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.execute(
                    update(WatchedSession)
                    .where(WatchedSession.active.is_(True))
                    .values(next_poll_at=utcnow() - timedelta(seconds=seconds_ago))
                )
        finally:
            await engine.dispose()

    asyncio.run(go())


def scalar(url: str, sql: str) -> Any:
    async def go() -> Any:
        engine = make_engine(url)
        try:
            async with engine.connect() as conn:
                return (await conn.execute(text(sql))).scalar()
        finally:
            await engine.dispose()

    return asyncio.run(go())


# -- the bot process ----------------------------------------------------------------------------


class Bot:
    """A real `rl-bot serve` (via tests.support.BotProcess) plus /proc and log readings."""

    def __init__(
        self,
        *,
        db_url: str,
        slack: FakeSlack,
        together: FakeTogether,
        env: dict[str, str],
        unset: tuple[str, ...] = (),
    ) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="rlbot-bench-bot-"))
        base = {"TOGETHER_TIMEOUT_SECONDS": "10", "LOG_LEVEL": "INFO"}
        self.proc = BotProcess.start(
            workdir=self.workdir,
            db_url=db_url,
            slack=slack,
            together=together,
            env=base | env,
            # The bot's own delivery interval applies, whatever the tests' setting,
            # unless a scenario sets one.
            unset=("DELIVERY_INTERVAL_SECONDS", *unset),
            # A cold start: the bot's own imports count in its CPU and memory.
            fork=False,
        )
        self.pid = self.proc.proc.pid
        self.last_cycle_index = 0  # which logged cycle `wait_cycle` returned last

    def __enter__(self) -> Bot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.proc.stop()
        keep = os.environ.get("RLBOT_BENCH_KEEP_LOGS")
        if keep:  # a directory to keep every bot's log in, to look into a bad run
            Path(keep).mkdir(parents=True, exist_ok=True)
            with suppress(OSError):
                shutil.copyfile(self.proc.log_path, Path(keep) / f"{self.workdir.name}.log")
        shutil.rmtree(self.workdir, ignore_errors=True)

    @property
    def url(self) -> str:
        return self.proc.url

    def log(self) -> str:
        return self.proc.log()

    def cycles(self) -> list[tuple[int, int, int, float]]:
        """(sessions, failed, transitions, seconds) of every logged poll cycle."""
        return [(int(a), int(b), int(c), float(d)) for a, b, c, d in CYCLE_RE.findall(self.log())]

    def wait_cycle(
        self,
        *,
        sessions: int,
        after: int = 0,
        timeout: float = 60.0,
        transitions: int | None = None,
    ) -> tuple[int, int, int, float]:
        """The first logged cycle after the `after`-th one that claimed `sessions` sessions."""
        deadline = time.monotonic() + timeout
        while True:
            for index, cycle in enumerate(self.cycles()[after:], start=after):
                if cycle[0] == sessions and (transitions is None or cycle[2] == transitions):
                    self.last_cycle_index = index
                    return cycle
            if self.proc.proc.poll() is not None:
                raise RuntimeError(f"rl-bot exited:\n{self.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no poll cycle of {sessions} sessions within {timeout:.0f}s; "
                    f"cycles so far {self.cycles()}\n{self.log()[-3000:]}"
                )
            time.sleep(0.05)

    def cycle_details(self) -> list[dict[str, Any]]:
        """The plan, list pages, GETs and next interval of every logged poll cycle."""
        return [
            {"plan": plan, "list_pages": int(pages), "gets": int(gets), "next_s": float(nxt)}
            for plan, pages, gets, nxt in DETAIL_RE.findall(self.log())
        ]

    def cpu_seconds(self) -> float:
        """utime + stime of the bot process so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def memory_mb(self) -> dict[str, float]:
        """VmHWM (peak RSS) and VmRSS, in MB."""
        out: dict[str, float] = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                out[key] = int(value.split()[0]) / 1024
        return out

    def metric(self, name: str) -> float | None:
        """One sample of the bot's /metrics, by its exact name (labels included, if any)."""
        return self.proc.metric(name)


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "python": sys.version.split()[0],
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
