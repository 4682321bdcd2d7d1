"""The root card's live chart through a real `rl-bot serve` (one per backend,
shared by the module), with the Slack-, Together- and W&B-shaped servers: the
card carries a valid `data_visualization` block of the run's first metric, or
of the polls' steps without a run; a workspace that refuses the block gets
the card without it (with the text sparkline), and is not asked again."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from bot.simulated.slack import SlackCall
from bot.simulated.slack_charts import blocks_problems
from bot.simulated.wandb import FakeRun
from tests.support import query, wait_until
from tests.support.wandb_rig import CHANNEL, fresh_rig, wandb_rig
from tests.support.wandb_rig import WandbRig as Rig

pytestmark = [
    pytest.mark.slow,
    pytest.mark.backend_independent(
        "the chart block on the card; the root update's exactly-once runs on both"
    ),
    pytest.mark.long("charts wait for W&B's refresh"),
]

#: the shortest WANDB_REFRESH_SECONDS allowed: the no-run chart needs a second read
REFRESH = 30


rig = wandb_rig(
    WANDB_METRICS="reward,loss", WANDB_REFRESH_SECONDS=str(REFRESH), STALL_AFTER_MINUTES="0"
)
fresh = fresh_rig()


def _rows(n: int) -> list[dict[str, Any]]:
    return [
        {"_step": i, "reward": 0.1 + (i % 37) / 50 + i / n, "loss": 1 / (1 + i)} for i in range(n)
    ]


def _subscribe(rig: Rig, session_id: str, *, team: str = "T1", channel: str = CHANNEL) -> str:
    token = uuid.uuid4().hex
    response = rig.bot.command(
        f"subscribe {session_id} stall=off target=10000000",
        response_url=rig.slack.response_url(token),
        team_id=team,
        channel_id=channel,
    )
    assert response.status_code == 200, response.text
    assert "Subscribed" in str(rig.slack.wait_for_response(token).get("text"))
    rows = query(
        rig.db_url, "SELECT root_ts FROM subscriptions WHERE session_id = :s", s=session_id
    )
    return str(rows[0][0])


def _chart_kind(rig: Rig, session_id: str) -> str | None:
    rows = query(rig.db_url, "SELECT view FROM session_metrics WHERE session_id = :s", s=session_id)
    if not rows or rows[0][0] is None:
        return None
    view = rows[0][0] if isinstance(rows[0][0], dict) else json.loads(rows[0][0])
    chart = view.get("chart")
    return chart.get("kind") if isinstance(chart, dict) else None


def _charts(call: SlackCall) -> list[dict[str, Any]]:
    return [b for b in call.blocks or [] if b.get("type") == "data_visualization"]


def _redrawn(rig: Rig, session_id: str, done: Any, *, timeout: float = 60) -> Any:
    """Move the session's step by more each time, after two polls saw the last
    move (a new steps/min and ETA redraw a card with a `target=`), until `done`
    finds what it waits for among the chat.update calls."""
    step, moves = 100, 0
    deadline = time.monotonic() + timeout
    while not (found := done(rig.slack.calls_to("chat.update"))):
        assert time.monotonic() < deadline, rig.slack._dump()
        moves += 1
        step += 10 * moves
        rig.together.set_status(session_id, "RUNNING", step=str(step))
        seen = rig.together.requests_for(session_id)
        wait_until(lambda s=seen: rig.together.requests_for(session_id) >= s + 2, what="polls")
        time.sleep(0.5)  # and the redraw they may owe
    return found


def test_a_session_with_a_run_has_its_first_metric_charted_on_the_card(fresh: Rig) -> None:
    rig = fresh
    sid = str(uuid.uuid4())
    rig.wandb.add_run("example-org", "grpo-gsm8k", sid[:8], FakeRun(rows=_rows(600)))
    rig.together.add(sid, step=40)
    root = _subscribe(rig, sid)
    wait_until(lambda: _chart_kind(rig, sid) == "metric", what="the run's chart kept")

    def charted(calls: list[SlackCall]) -> list[SlackCall]:
        return [c for c in calls if c.ok and c.ts == root and _charts(c)]

    update = _redrawn(rig, sid, charted)[-1]
    assert blocks_problems(update.blocks or []) == []  # slack_sdk's models + the limits
    [chart] = _charts(update)
    assert chart["title"] == "reward by step"
    line = chart["chart"]
    assert line["type"] == "line" and [s["name"] for s in line["series"]] == ["reward"]
    categories = line["axis_config"]["categories"]
    steps = [int(c) for c in categories]
    assert len(steps) == 20 and steps == sorted(steps) and steps[0] == 0
    assert 590 <= steps[-1] <= 599  # the last step of W&B's sample of 600 rows
    kinds = [b["type"] for b in update.blocks or []]
    assert kinds.index("data_visualization") < kinds.index("actions")
    assert "W&B: reward" in json.dumps(update.blocks, ensure_ascii=False)  # the line stays


def test_a_session_without_a_run_charts_its_steps_over_time(fresh: Rig) -> None:
    rig = fresh
    sid = str(uuid.uuid4())
    rig.together.add(sid, step=10, metadata={})
    root = _subscribe(rig, sid)

    def charted(calls: list[SlackCall]) -> list[SlackCall]:
        return [c for c in calls if c.ok and c.ts == root and _charts(c)]

    update = _redrawn(rig, sid, charted, timeout=REFRESH + 40)[-1]
    assert blocks_problems(update.blocks or []) == []
    [chart] = _charts(update)
    assert chart["chart"]["axis_config"]["x_label"] == "time (UTC)"
    values = [p["value"] for p in chart["chart"]["series"][0]["data"]]
    moved_to = {10} | {100 + 5 * k * (k + 1) for k in range(1, 100)}  # what `_redrawn` set
    assert len(values) >= 2 and values == sorted(values) and set(values) <= moved_to
    assert not rig.wandb.history_calls()  # nothing asked of W&B for it


def test_a_refused_chart_falls_back_and_is_remembered_for_the_team(fresh: Rig) -> None:
    rig = fresh
    rig.slack.refuse_charts = True  # a workspace without the block
    first, second, other = (str(uuid.uuid4()) for _ in range(3))
    for sid in (first, second, other):
        rig.wandb.add_run("example-org", "grpo-gsm8k", sid[:8], FakeRun(rows=_rows(300)))
        rig.together.add(sid, step=40)
    root = _subscribe(rig, first)
    wait_until(lambda: _chart_kind(rig, first) == "metric", what="the run's chart kept")

    def fell_back(calls: list[SlackCall]) -> list[SlackCall] | None:
        refused = [c for c in calls if not c.ok and c.ts == root and _charts(c)]
        plain = (
            [c for c in calls if c.ok and c.ts == root and c.at > refused[0].at] if refused else []
        )
        return [refused[0], plain[0]] if plain else None

    refused, plain = _redrawn(rig, first, fell_back)
    assert refused.error == "invalid_blocks" and not _charts(plain)
    assert "`" in json.dumps(plain.blocks, ensure_ascii=False).split("W&B: reward", 1)[1]
    wait_until(
        lambda: query(rig.db_url, "SELECT team_id FROM chart_refusals") == [("T1",)],
        what="the refusal remembered",
    )

    # Slack would take it now, but the team's cards no longer try: a second card in
    # T1 goes without; another team's card carries it.
    rig.slack.refuse_charts = False
    second_root = _subscribe(rig, second, channel="C456")
    other_root = _subscribe(rig, other, team="T2", channel="C789")
    for sid in (second, other):
        wait_until(lambda sid=sid: _chart_kind(rig, sid) == "metric", what="charts kept")

    def other_charted(calls: list[SlackCall]) -> list[SlackCall]:
        return [c for c in calls if c.ok and c.ts == other_root and _charts(c)]

    def second_redrawn(calls: list[SlackCall]) -> list[SlackCall]:
        return [c for c in calls if c.ok and c.ts == second_root]

    _redrawn(rig, other, other_charted)
    _redrawn(rig, second, second_redrawn)
    _redrawn(rig, first, lambda calls: len([c for c in calls if c.ts == root]) >= 4)
    t1_roots = (root, second_root)
    t1_updates = [c for c in rig.slack.calls_to("chat.update") if c.ts in t1_roots]
    assert [c for c in t1_updates if _charts(c)] == [refused]  # asked once, ever
    assert all(c.ok for c in t1_updates if c is not refused)
