"""What a serving process that only polls and tells keeps in memory: the
libraries it never uses stay unimported for its whole life, start-up included;
and glibc keeps two malloc arenas for it, not one per thread that ever ran.

Python's `-X importtime` (`PYTHONPROFILEIMPORTTIME=1`) writes a line to stderr,
the bot's log, for every module the process imports, whenever it does: the
log is the process's own account of what it loaded."""

from __future__ import annotations

import platform
import re
import sys
from pathlib import Path

import pytest

from bot.ops.malloc import cap_arenas
from bot.simulated import FakeSlack, FakeTogether
from tests.support import BotProcess, query

SID = "0f6e2d8a-5a0e-4d6b-9b43-3c1c2d9e7a10"
#: what only `rl-bot migrate`, a chart, the demo or PostgreSQL need
NEVER = (
    "alembic",
    "mako",
    "matplotlib",
    "numpy",
    "PIL",
    "bot.demo",
    "bot.simulated",
    "asyncpg",
    "sqlalchemy.dialects.postgresql",
)
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", re.M)


@pytest.mark.slow  # a cold `rl-bot serve`, not forked from the tests' preloaded server
@pytest.mark.backend_independent("imports do not depend on the database")
def test_a_polling_bot_on_sqlite_that_migrated_its_file_imports_no_alembic_nor_postgresql(
    tmp_path: Path, slack: FakeSlack, together: FakeTogether
) -> None:
    url = f"sqlite:///{tmp_path}/fresh.db"  # empty: `serve` migrates it at start
    together.add(SID)
    bot = BotProcess.start(
        workdir=tmp_path,
        db_url=url,
        slack=slack,
        together=together,
        env={"PYTHONPROFILEIMPORTTIME": "1"},
        fork=False,
    )
    try:
        assert bot.command(f"subscribe {SID}", response_url=slack.response_url("s")).is_success
        slack.wait_for(lambda: [c for c in slack.successful_posts("C123") if c.thread_ts is None])
        together.set_status(SID, "STOPPING")
        slack.wait_for(
            lambda: [c for c in slack.successful_posts("C123") if "Stopping" in (c.text or "")]
        )
        log = bot.log()
    finally:
        bot.stop()
    assert query(url, "SELECT count(*) FROM alembic_version") == [(1,)]  # it did migrate
    imported = set(IMPORTED.findall(log))
    assert "bot.poll.cycle" in imported  # the log does list the process's imports
    unused = sorted(m for m in imported if m.split(".")[0] in NEVER or m.startswith(NEVER))
    assert unused == []


def test_malloc_arenas_are_capped_unless_the_operator_chose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    assert cap_arenas() is False  # glibc already read the operator's value
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert cap_arenas() is glibc
