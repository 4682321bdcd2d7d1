"""A `for` rule on a W&B metric is told within one W&B read of having held its
duration, through a real `rl-bot serve` with the Slack-, Together- and W&B-shaped
servers at the shortest refresh W&B reads allow (30 s): the crossing is timed
from when the run logged it, not from the read that first saw it."""

from __future__ import annotations

import json
import time

import pytest

from bot.simulated import FakeSlack, FakeTogether
from bot.simulated.wandb import FakeRun, FakeWandb
from tests.support import BotFactory, BotProcess, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.long("a `for` rule waits out W&B's 30 s reads")]

SID = "5a3e4567-e89b-12d3-a456-426614174abc"
CHANNEL = "C123"
HOLD = 40.0
REFRESH = 30.0


def say(bot: BotProcess, slack: FakeSlack, text: str) -> str:
    token = f"t-{time.monotonic_ns()}"
    r = bot.command(text, response_url=slack.response_url(token), channel_id=CHANNEL)
    assert r.status_code == 200, r.text
    return r.text if r.content.strip() else json.dumps(slack.wait_for_response(token))


@pytest.mark.backend_independent("when a rule fires, not how its state is stored")
def test_a_for_rule_fires_at_the_first_read_after_it_has_held(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    start = time.time() - 300
    rows = [{"_step": i, "_timestamp": start + i, "reward": 0.5, "loss": 1.0} for i in range(10)]
    run = FakeRun(rows=rows)
    with FakeWandb() as wandb:
        wandb.add_run("example-org", "grpo-gsm8k", SID[:8], run)
        together.add(SID, "RUNNING", step="9")
        bot = start_bot(
            WANDB_API_KEY=wandb.api_key,
            WANDB_BASE_URL=wandb.url,
            WANDB_REFRESH_SECONDS=str(int(REFRESH)),
        )
        assert "for 40 s" in say(bot, slack, f"alert {SID} reward &lt; 0.2 for 40s")
        assert "Subscribed" in say(bot, slack, f"subscribe {SID}")

        def reads() -> int:
            return sum(c.operation == "RunSummarySampledHistory" for c in wandb.calls)

        wait_until(lambda: reads() >= 1, what="the first W&B read")
        # Just after a read, the run logs the fall: the reads that follow see it
        # about a refresh later, and again a refresh after that.
        fell = time.time()
        run.rows.append({"_step": 10, "_timestamp": fell, "reward": 0.1, "loss": 1.0})
        seen, read_at, told_at = reads(), [], None
        deadline = time.monotonic() + 150
        while told_at is None:
            assert time.monotonic() < deadline, f"not told; reads at {read_at}"
            if reads() > seen:
                seen = reads()
                read_at.append(time.time() - fell)
            posts = slack.successful_posts(CHANNEL)
            if any("`reward` is 0.1" in (c.text or "").replace("\u2060", "") for c in posts):
                told_at = time.time() - fell
            time.sleep(0.05)
        after_hold = [t for t in read_at if t >= HOLD]
        assert len(after_hold) == 1, (read_at, told_at)  # told at the first read that could
        assert told_at <= HOLD + REFRESH + 15, (read_at, told_at)
