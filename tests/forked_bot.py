"""Starting `rl-bot` processes for the tests from a fork server that has already
imported the bot.

Most of a bot process's start-up is importing its libraries (SQLAlchemy, Bolt,
pydantic, uvicorn), the same work for every one of the hundreds of processes
the suite starts. A `multiprocessing` fork server imports them once per test
worker and forks each bot from there: the child is still its own process with
its own pid, environment, working directory, log file and event loop, runs
`bot.cli.main` exactly as `python -m bot` would, and can be signalled and
killed like any other. What a fork skips is only the imports, which the bot
keeps free of side effects (nothing happens at import time).

The benchmark does not use this: it measures a bot's own CPU and memory from a
cold start.
"""

from __future__ import annotations

import contextlib
import gc
import io
import multiprocessing
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path

#: what `rl-bot serve`, `socket` and `migrate` import, so a fork has it already
PRELOAD = (
    "bot.cli",
    "bot.ops.logs",
    "bot.runtime",
    "bot.slack.app",
    "bot.slack.web",
    "bot.slack.socket_mode",
    "bot.jobs.ticker",
    "bot.store.migrations",
    "uvicorn",
    "aiosqlite",
    "asyncpg",
    "sqlalchemy.dialects.sqlite.aiosqlite",
    "sqlalchemy.dialects.postgresql.asyncpg",
    "alembic.command",
    "alembic.config",
    "alembic.runtime.migration",
    # imported only once a bot runs: its HTTP clients' transport, uvicorn's server
    # protocols and loop, the scheduler's executor and trigger
    "httpx",
    "httpcore",
    "h11",
    "certifi",
    "anyio._backends._asyncio",
    "anyio.streams.memory",
    "anyio.streams.stapled",
    "anyio.streams.tls",
    "uvicorn.lifespan.on",
    "uvicorn.loops.auto",
    "uvicorn.loops.asyncio",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.websockets.auto",
    "apscheduler.executors.asyncio",
    "apscheduler.triggers.interval",
    "slack_bolt.listener_matcher.async_builtins",
)

_context: ForkServerContext | None = None


def _fork_server() -> ForkServerContext:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(PRELOAD))
        _context = context
    return _context


def _run_bot(args: Sequence[str], env: dict[str, str], cwd: str, log_path: str) -> None:
    """The child: a new session, the log as stdout and stderr, the test's
    environment and working directory, then the bot's own entry point."""
    os.setsid()
    # What the fork server imported lives as long as the process: out of the
    # collector's way, so no collection walks (and copies) the inherited pages.
    gc.freeze()
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    # Unbuffered, as PYTHONUNBUFFERED makes a fresh interpreter: tests read the log live.
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "wb", closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "wb", closefd=False), write_through=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = ["rl-bot", *args]
    from bot.cli import main

    raise SystemExit(main(list(args)))


class ForkedProcess:
    """A forked bot with the part of `subprocess.Popen`'s interface the tests use."""

    def __init__(self, process: BaseProcess) -> None:
        self._process = process

    @property
    def pid(self) -> int:
        assert self._process.pid is not None
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return None if self._process.is_alive() else self._process.exitcode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(["rl-bot"], timeout or 0.0)
        return code


def launch(args: Sequence[str], *, env: dict[str, str], cwd: Path, log_path: Path) -> ForkedProcess:
    """Fork `rl-bot <args>` from the fork server; returns at once."""
    process = _fork_server().Process(
        target=_run_bot, args=(list(args), dict(env), str(cwd), str(log_path)), daemon=False
    )
    process.start()
    return ForkedProcess(process)
