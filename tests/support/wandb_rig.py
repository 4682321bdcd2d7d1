"""One real `rl-bot serve` per backend with the Slack-, Together- and W&B-shaped
servers, shared by a module's tests (`wandb_rig`), and each test's clean start
(`WandbRig.fresh`): the chart, live chart and metric tests' bot."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from bot.simulated import FakeSlack, FakeTogether
from bot.simulated.slack_files import Upload
from bot.simulated.wandb import FakeWandb
from tests.conftest import _backends, fresh_database
from tests.support import BotProcess, query

CHANNEL = "C123"
#: emptied before each test: what a chart, a subscription or a metric left
TABLES = ("outbox", "subscriptions", "watched_sessions", "progress_points", "chart_refusals")


@dataclass
class WandbRig:
    bot: BotProcess
    slack: FakeSlack
    together: FakeTogether
    wandb: FakeWandb
    db_url: str

    def ask(self, text: str) -> str:
        return self.ask_in(CHANNEL, text)

    def ask_in(self, channel: str, text: str) -> str:
        token = uuid.uuid4().hex
        response = self.bot.command(
            text, response_url=self.slack.response_url(token), channel_id=channel
        )
        assert response.status_code == 200, response.text
        return token

    def answers(self, token: str) -> list[str]:
        return [str(r.get("text")) for r in self.slack.responses.get(token, [])]

    def wait_answer(self, token: str) -> str:
        return str(self.slack.wait_for_response(token).get("text"))

    def root_ts(self, session_id: str, channel: str = CHANNEL) -> str:
        rows = query(
            self.db_url,
            "SELECT root_ts FROM subscriptions WHERE session_id = :s AND channel_id = :c",
            s=session_id,
            c=channel,
        )
        return str(rows[0][0])

    def wait_upload(self, count: int, thread_ts: str | None = None) -> list[Upload]:
        return self.slack.wait_for(
            lambda: (
                len(self.slack.uploads_in(CHANNEL, thread_ts)) >= count
                and self.slack.uploads_in(CHANNEL, thread_ts)
            ),
            timeout=30,
        )

    @contextlib.contextmanager
    def fresh(self, tail: int = 60) -> Iterator[WandbRig]:
        """One test's turn: the fakes and tables emptied before it; after it, the bot's
        log tail (pytest shows it only when the test fails)."""
        self.slack.reset()
        self.wandb.reset()
        self.wandb.runs.clear()
        self.wandb.projects.clear()
        with self.together._lock:
            self.together.sessions.clear()
        for table in TABLES:
            query(self.db_url, f"DELETE FROM {table}")
        yield self
        print("--- bot log tail ---\n" + "\n".join(self.bot.log().splitlines()[-tail:]))


def wandb_rig(**env: str) -> Any:
    """A module's `rig` fixture: one bot (with `env`, and W&B's key and address) per
    backend, shared by its tests."""

    @pytest.fixture(scope="module", params=_backends())
    def rig(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[WandbRig]:
        with (
            fresh_database(request, request.param) as db_url,
            FakeSlack() as slack,
            FakeTogether() as together,
            FakeWandb() as wandb,
        ):
            bot = BotProcess.start(
                workdir=tmp_path_factory.mktemp("bot"),
                db_url=db_url,
                slack=slack,
                together=together,
                env={"WANDB_API_KEY": wandb.api_key, "WANDB_BASE_URL": wandb.url, **env},
            )
            bot.command("help", response_url=slack.response_url("warm-up"))
            try:
                yield WandbRig(bot, slack, together, wandb, db_url)
            finally:
                bot.stop()

    return rig


def fresh_rig() -> Any:
    """A module's `fresh` fixture: its `rig`, reset for one test."""

    @pytest.fixture
    def fresh(rig: WandbRig) -> Iterator[WandbRig]:
        with rig.fresh() as clean:
            yield clean

    return fresh
