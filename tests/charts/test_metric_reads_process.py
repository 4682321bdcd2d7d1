"""The card's W&B reads through a real `rl-bot serve` (the chart tests' bot and
fakes): a run whose points span the whole float range still draws its card's
sparkline and holds no channel, and a run whose answer no JSON reader takes is
that session's error while the read pass goes on to the others."""

from __future__ import annotations

import json
import math
import uuid

import pytest

from bot.simulated.wandb import FakeRun
from tests.support import query, wait_until
from tests.support.wandb_rig import CHANNEL, fresh_rig, wandb_rig
from tests.support.wandb_rig import WandbRig as Rig

pytestmark = [
    pytest.mark.slow,
    pytest.mark.backend_independent("reading and drawing W&B answers"),
]

rig = wandb_rig(STALL_AFTER_MINUTES="0.05", ONCALL_CHANNEL="COPS", ONCALL_ON_METRIC="true")
fresh = fresh_rig()


def new_sid() -> str:
    return str(uuid.uuid4())


def _subscribe(rig: Rig, session_id: str, options: str = "stall=off") -> str:
    token = rig.ask(f"subscribe {session_id} {options}")
    assert "Subscribed" in rig.wait_answer(token), rig.answers(token)
    return rig.root_ts(session_id)


def test_a_metric_spanning_the_float_range_is_drawn_and_holds_no_channel(fresh: Rig) -> None:
    """W&B points from -1e308 to 1e308 (an infinite span): the root card is redrawn
    with its sparkline, and the channel's next change is told at once."""
    rig = fresh
    wide, other = "0" + new_sid()[1:], "f" + new_sid()[1:]  # `wide` is read first
    rows = [{"_step": i, "loss": 1e308 if i % 2 else -1e308, "reward": 0.5} for i in range(40)]
    rig.wandb.add_run("example-org", "grpo-gsm8k", wide[:8], FakeRun(rows=rows))
    rig.together.add(wide)
    rig.together.add(other, metadata={})
    root = _subscribe(rig, wide, "stall=off chart=off")
    other_root = _subscribe(rig, other, "stall=off chart=off")
    wait_until(
        lambda: (
            query(
                rig.db_url,
                "SELECT count(*) FROM session_metrics WHERE session_id = :s AND read_at IS NOT NULL",
                s=wide,
            )
            == [(1,)]
        ),
        what="the W&B read of the wide run",
    )

    rig.together.set_status(wide, "STOPPING")
    wait_until(lambda: rig.slack.posts_in_thread(CHANNEL, root), what="the change told")
    rig.together.set_status(other, "STOPPING")
    wait_until(
        lambda: rig.slack.posts_in_thread(CHANNEL, other_root),
        timeout=15,
        what="the channel's next change told, not held behind the card",
    )
    drawn = json.dumps([u.params for u in rig.slack.updates(CHANNEL, root)], ensure_ascii=False)
    assert "loss *1.00e+308* `▁█▁█" in drawn, drawn[-2000:]


def test_a_w_and_b_answer_nested_too_deep_is_one_sessions_error_and_the_pass_goes_on(
    fresh: Rig,
) -> None:
    rig = fresh
    deep, other = "0" + new_sid()[1:], "f" + new_sid()[1:]  # `deep` is read first
    rig.wandb.add_run(
        "example-org", "grpo-gsm8k", deep[:8], FakeRun(answer_text="[" * 5000 + "]" * 5000)
    )
    rows = [{"_step": i, "loss": math.nan if i >= 30 else 1.0, "reward": 0.5} for i in range(40)]
    rig.wandb.add_run("example-org", "grpo-gsm8k", other[:8], FakeRun(rows=rows))
    rig.together.add(deep)
    rig.together.add(other)
    _subscribe(rig, deep)
    root = _subscribe(rig, other)

    wait_until(
        lambda: any(
            "`loss` became NaN" in (c.text or "") for c in rig.slack.posts_in_thread(CHANNEL, root)
        ),
        what="the other session's NaN told",
    )
    [(view,)] = query(rig.db_url, "SELECT view FROM session_metrics WHERE session_id = :s", s=deep)
    stored = view if isinstance(view, dict) else json.loads(view)
    assert stored["error"] == "W&B sent an answer the bot could not read."
