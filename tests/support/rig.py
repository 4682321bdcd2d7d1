"""One real `rl-bot serve` per backend shared by a module's tests, with its fakes
and database (`shared_rig`), and a command asked of it (`ask`)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import _backends, fresh_database
from tests.fakes import FakeSlack, FakeTogether
from tests.support import BotProcess, query


@dataclass
class Rig:
    """One bot, its fakes and its database, shared by a module's tests."""

    bot: BotProcess
    slack: FakeSlack
    together: FakeTogether
    db_url: str

    def query(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        return query(self.db_url, sql, **params)

    def reset(self) -> None:
        """Forget what earlier tests did: fakes, faults, and anything stored."""
        self.together.clear_faults()
        self.together.latency = 0.0
        self.together.session_latency.clear()
        with self.together._lock:
            self.together.sessions.clear()
        for table in ("outbox", "subscriptions", "watched_sessions", "incidents"):
            self.query(f"DELETE FROM {table}")
        self.together.reset_counts()
        self.slack.reset()

    @contextlib.contextmanager
    def fresh(self, tail: int = 60) -> Iterator[Rig]:
        """One test's turn: reset before it; after it, the bot's log tail (pytest shows it
        only when the test fails)."""
        self.reset()
        yield self
        print("--- bot log tail ---\n" + "\n".join(self.bot.log().splitlines()[-tail:]))


@contextlib.contextmanager
def module_rig(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, **env: str
) -> Iterator[Rig]:
    """A migrated database on `request.param`'s backend and one `rl-bot serve` on it."""
    workdir: Path = tmp_path_factory.mktemp("bot")
    with (
        fresh_database(request, request.param) as db_url,
        FakeSlack() as slack,
        FakeTogether() as together,
    ):
        bot = BotProcess.start(
            workdir=workdir, db_url=db_url, slack=slack, together=together, env=env
        )
        # Bolt asks Slack's auth.test once, on the first request: do it now, so no
        # test's count of Slack calls depends on which test a worker runs first.
        bot.command("help", response_url=slack.response_url("warm-up"))
        try:
            yield Rig(bot=bot, slack=slack, together=together, db_url=db_url)
        finally:
            bot.stop()


def shared_rig(**env: str) -> Any:
    """A module's `rig` fixture: one bot (with `env`) per backend, shared by its tests."""

    @pytest.fixture(scope="module", params=_backends())
    def rig(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[Rig]:
        with module_rig(request, tmp_path_factory, **env) as shared:
            yield shared

    return rig


def ask(rig: Rig, text: str, **kwargs: Any) -> tuple[httpx.Response, str]:
    token = uuid.uuid4().hex
    response = rig.bot.command(text, response_url=rig.slack.response_url(token), **kwargs)
    assert response.status_code == 200, response.text
    return response, token
