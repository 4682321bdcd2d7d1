"""Test plumbing: real `rl-bot serve` processes, database helpers, signed requests."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
from hypothesis import settings

from bot.simulated import FakeSlack, FakeTogether, block_action_body, sign, slash_command_body
from bot.simulated._http import WAIT_SECONDS
from tests import forked_bot
from tests.forked_bot import ForkedProcess

SIGNING_SECRET = "test-signing-secret-0123456789"
BOT_TOKEN = "xoxb-test-bot-token-0123456789"
REPO = Path(__file__).resolve().parents[2]


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_async(coro: Any) -> Any:
    return asyncio.run(coro)


def pg_admin(base: str, *statements: str) -> None:
    import asyncpg

    async def go() -> None:
        conn = await asyncpg.connect(base.replace("postgresql://", "postgres://") + "/postgres")
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    _run_async(go())


def postgres_available(base: str) -> bool:
    try:
        pg_admin(base, "SELECT 1")
        return True
    except Exception:
        return False


def query(db_url: str, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    """Read the bot's database from the test, through the bot's own URL handling."""
    from sqlalchemy import text

    from bot.store.engine import make_engine

    async def go() -> list[tuple[Any, ...]]:
        engine = make_engine(db_url)
        try:
            async with engine.begin() as conn:
                result = await conn.execute(text(sql), params)
                return [tuple(r) for r in result] if result.returns_rows else []
        finally:
            await engine.dispose()

    return list(_run_async(go()))


@functools.cache
def local_http() -> httpx.Client:
    """One client for the tests' requests to their bots on 127.0.0.1. `httpx.get`
    builds a client per call, TLS context and all (tens of ms of CPU), and the
    readiness and metric polls call it many times a second. Idle connections are
    dropped after 2 s, before uvicorn closes them (5 s), so none is reused as the
    bot hangs up."""
    return httpx.Client(limits=httpx.Limits(keepalive_expiry=2.0))


def wait_until(
    predicate: Callable[[], Any], timeout: float = WAIT_SECONDS, what: str = "condition"
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def examples(full: int) -> int:
    """A property test's `max_examples`: `full` under hypothesis' default profile,
    scaled with the loaded one (conftest loads `quick` for the quick loop)."""
    return max(10, full * settings.default.max_examples // 100)


def base_env(*, db_url: str, slack: FakeSlack, together: FakeTogether) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "TOGETHER_"))}
    env.update(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack.api_url,
        TOGETHER_API_KEY=together.api_key,
        TOGETHER_BASE_URL=together.base_url,
        TOGETHER_TIMEOUT_SECONDS="2",
        TOGETHER_MAX_RPS="500",
        DATABASE_URL=db_url,
        POLL_INTERVAL_SECONDS="1",
        # One GET per session, as these tests count them; tests/poll/test_list_polling.py
        # covers the list plan that POLL_PLAN=auto picks for many sessions.
        POLL_PLAN="get",
        # No resource reads: these tests count Together requests per session.
        # tests/alerts/test_spend_process.py turns the spend watch on (its default).
        SPEND_WATCH="false",
        # The bot rings its delivery loop when it writes outbox rows; the interval
        # only paces retries and rows due later, as in production (its default).
        DELIVERY_INTERVAL_SECONDS="1",
        CHANNEL_MIN_INTERVAL_SECONDS="0",
        LEASE_SECONDS="10",
        LOG_FORMAT="json",
        LOG_LEVEL="INFO",
        PYTHONUNBUFFERED="1",
    )
    return env


@dataclass
class BotProcess:
    proc: subprocess.Popen[bytes] | ForkedProcess
    url: str
    log_path: Path
    env: dict[str, str]
    workdir: Path
    args: Sequence[str] = field(default_factory=list)
    # A second SIGTERM would make uvicorn skip its graceful shutdown.
    _stop_requested: bool = field(default=False, init=False, repr=False)

    @classmethod
    def start(
        cls,
        *,
        workdir: Path,
        db_url: str,
        slack: FakeSlack,
        together: FakeTogether,
        env: dict[str, str] | None = None,
        command: str = "serve",
        wait: bool = True,
        unset: Sequence[str] = (),
        fork: bool | None = None,
    ) -> BotProcess:
        """Start `rl-bot <command>`; `fork=False` starts a fresh interpreter
        (the benchmark's cold start) instead of forking one that has the bot's
        imports done (`tests.forked_bot`). RLBOT_TEST_COLD_START=1 makes every
        test start cold, to compare or to rule the fork server out."""
        if fork is None:
            fork = os.environ.get("RLBOT_TEST_COLD_START") != "1"
        full_env = base_env(db_url=db_url, slack=slack, together=together)
        for name in unset:
            full_env.pop(name, None)
        full_env.update(env or {})
        # The port is free when picked but may be taken before the bot binds it
        # (another test's server): a bind failure is retried on a fresh port.
        for attempt in range(5):
            port = free_tcp_port()
            args = [
                sys.executable,
                "-m",
                "bot",
                command,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ]
            log_path = workdir / f"bot-{port}.log"
            proc: subprocess.Popen[bytes] | ForkedProcess
            if fork:
                log_path.write_bytes(b"")
                proc = forked_bot.launch(args[3:], env=full_env, cwd=workdir, log_path=log_path)
            else:
                with log_path.open("wb") as log:
                    proc = subprocess.Popen(
                        args,
                        cwd=workdir,
                        env=full_env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
            bot = cls(
                proc=proc,
                url=f"http://127.0.0.1:{port}",
                log_path=log_path,
                env=full_env,
                workdir=workdir,
                args=args,
            )
            if not wait:
                return bot
            try:
                bot.wait_healthy()
            except AssertionError:
                if (
                    attempt < 4
                    and bot.proc.poll() is not None
                    and "address already in use" in bot.log()
                ):
                    continue
                raise
            return bot
        raise AssertionError("unreachable")

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"rl-bot exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if local_http().get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"rl-bot not healthy after {timeout}s:\n{self.log()}")

    def metric(self, name: str) -> float | None:
        """One sample of the bot's /metrics, by its exact name (labels included, if any)."""
        body = local_http().get(f"{self.url}/metrics", timeout=5).text
        for line in body.splitlines():
            head, _, value = line.rpartition(" ")
            if head == name:
                return float(value)
        return None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = 80) -> str:
        """The end of the log, headed by the command, for a failing test's output."""
        tail = "\n".join(self.log().splitlines()[-lines:])
        return f"--- log of {' '.join(self.args[2:])} ---\n{tail}"

    def command(
        self,
        text: str,
        *,
        response_url: str,
        channel_id: str = "C123",
        user_id: str = "U123",
        team_id: str = "T1",
        timestamp: int | None = None,
        secret: str = SIGNING_SECRET,
        command: str = "/rl-session",
    ) -> httpx.Response:
        body = slash_command_body(
            text,
            command=command,
            user_id=user_id,
            channel_id=channel_id,
            team_id=team_id,
            response_url=response_url,
        )
        return self.post(body, secret=secret, timestamp=timestamp)

    def click(
        self,
        action_id: str,
        value: str,
        *,
        response_url: str,
        channel_id: str = "C123",
        user_id: str = "U123",
        team_id: str = "T1",
        message_ts: str | None = None,
        is_ephemeral: bool = True,
        message: dict[str, Any] | None = None,
    ) -> httpx.Response:
        body = block_action_body(
            action_id,
            value,
            user_id=user_id,
            channel_id=channel_id,
            team_id=team_id,
            response_url=response_url,
            message_ts=message_ts,
            is_ephemeral=is_ephemeral,
            message=message,
        )
        return self.post(body)

    def post(
        self,
        body: str,
        *,
        secret: str = SIGNING_SECRET,
        timestamp: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        signed = sign(secret, body, timestamp)
        if headers is not None:
            signed = headers
        return local_http().post(
            f"{self.url}/slack/events", content=body, headers=signed, timeout=10
        )

    def request_stop(self) -> None:
        """SIGTERM, without waiting: `stop` or `terminate` waits for the exit."""
        if self.proc.poll() is None and not self._stop_requested:
            self.proc.send_signal(signal.SIGTERM)
            self._stop_requested = True

    def terminate(self, timeout: float = 30.0) -> int:
        self.request_stop()
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        try:
            self.terminate(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()


class BotFactory(Protocol):
    def __call__(self, **env: str) -> BotProcess: ...


def watched_rows(session: Any, *, root_ts: str = "1.000", filters: str | None = None) -> list[Any]:
    """A session as the poller finds it on its first due poll (its seen state
    stored) and one channel's subscription to it, for in-process poll tests."""
    from bot.store.tables import Subscription, WatchedSession, utcnow
    from bot.training.snapshots import seen_state

    subscription = Subscription(
        team_id="T1",
        channel_id="C1",
        session_id=session.id,
        root_ts=root_ts,
        subscribed_by="U1",
        active=True,
    )
    if filters is not None:
        subscription.filters = filters
    watched = WatchedSession(
        session_id=session.id,
        transition_seq=0,
        next_poll_at=utcnow(),
        active=True,
        consecutive_failures=0,
        write_failures=0,
        **seen_state(session),
    )
    return [watched, subscription]
