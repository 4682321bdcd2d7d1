"""A metric gone NaN while nobody can hear it, through a real `rl-bot serve`
with the Slack-, Together- and W&B-shaped servers: a session watched only for a
person's App Home switch has no thread, so its NaN is not spent on nobody; the
thread a channel adds later hears it at the next W&B read."""

from __future__ import annotations

import json
import math
import uuid

import pytest

from bot.simulated import FakeSlack, FakeTogether
from bot.simulated.wandb import FakeRun, FakeWandb
from tests.support import BotFactory, query, wait_until
from tests.support.home import click_home

pytestmark = [
    pytest.mark.slow,
    pytest.mark.backend_independent(
        "W&B reads and the NaN rule; the outbox's exactly-once is tested on both"
    ),
    pytest.mark.long("waits for W&B's second read, 30 s after the first"),
]

CHANNEL = "CNAN"


def test_a_nan_found_with_no_thread_is_told_to_the_thread_added_later(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    with FakeWandb() as wandb:
        bot = start_bot(
            WANDB_API_KEY=wandb.api_key,
            WANDB_BASE_URL=wandb.url,
            WANDB_REFRESH_SECONDS="30",  # the least: the second read comes 30 s after the first
            CREATED_BY_USER_MAP="user_ana=UANA",
        )
        sid = str(uuid.uuid4())
        rows = [{"_step": i, "reward": i / 100, "loss": 2.0 - i / 100} for i in range(100)]
        for row in rows[40:]:
            row["loss"] = math.nan
        wandb.add_run("example-org", "grpo-gsm8k", sid[:8], FakeRun(rows=rows))
        click_home(bot, "rl_home_personal", "on", "UANA")
        together.add(sid, "RUNNING", created_by="user_ana")
        wait_until(
            lambda: query(db_url, "SELECT 1 FROM personal_watches WHERE session_id = :s", s=sid),
            what="the switch took the session",
            timeout=30,
        )
        # The first read finds the NaN while the session has no thread.
        wait_until(lambda: wandb.history_calls(), what="the first W&B read", timeout=30)

        def told() -> list[str]:
            return [
                c.text or ""
                for c in slack.successful_posts(CHANNEL)
                if "`loss` became NaN" in (c.text or "")
            ]

        token = uuid.uuid4().hex
        bot.command(f"subscribe {sid}", response_url=slack.response_url(token), channel_id=CHANNEL)
        assert "Subscribed" in json.dumps(slack.wait_for_response(token))
        root = query(db_url, "SELECT root_ts FROM subscriptions WHERE session_id = :s", s=sid)
        wait_until(told, what="the NaN told in the thread added later", timeout=60)
        [post] = [
            c for c in slack.successful_posts(CHANNEL) if "`loss` became NaN" in (c.text or "")
        ]
        assert post.thread_ts == root[0][0]
        assert len(wandb.history_calls()) >= 2
