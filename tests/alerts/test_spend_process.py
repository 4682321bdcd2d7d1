"""The spend watch, through real `rl-bot serve` and the Slack- and
Together-shaped servers: a subscribed session on a READY model resource gets a
root card with the resource's GPUs, its price and an estimated spend, and two
sessions sharing one resource cost one resource GET per poll cycle."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.conftest import BotLauncher
from tests.support import BotFactory, BotProcess, query, wait_until

pytestmark = pytest.mark.backend_independent(
    "the spend watch's reads and the card's lines; what it stores is tested on both"
)

SID = "5a3e4567-e89b-12d3-a456-426614174000"
SID2 = "6b3e4567-e89b-12d3-a456-426614174000"
RID = "7c3e4567-e89b-12d3-a456-426614174000"


def subscribe(bot: BotProcess, slack: FakeSlack, session_id: str, channel: str) -> str:
    token = f"sub-{channel}"
    r = bot.command(
        f"subscribe {session_id}", response_url=slack.response_url(token), channel_id=channel
    )
    assert r.status_code == 200, r.text
    answer = r.text if r.content.strip() else json.dumps(slack.wait_for_response(token))
    assert "Subscribed" in answer, answer
    return next(c.ts for c in slack.successful_posts(channel) if c.thread_ts is None and c.ts)


def card(slack: FakeSlack, channel: str, root: str) -> str:
    updates = slack.updates(channel, root)
    return json.dumps(updates[-1].blocks, ensure_ascii=False) if updates else ""


def move_until(together: FakeTogether, shown: Callable[[], bool], *, what: str) -> None:
    """Move SID's step by 10 after each poll that saw the last move, until `shown`:
    the rate is measured between two moves the polls saw, however slow the
    machine (a poll that misses a move only delays it)."""
    step = 100
    deadline = time.monotonic() + 60
    while not shown():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        step += 10
        together.set_status(SID, "RUNNING", step=str(step))
        seen = together.requests_for(SID)
        wait_until(lambda s=seen: together.requests_for(SID) >= s + 2, what="two polls")
        time.sleep(0.5)  # and the redraw they may owe


def test_the_card_shows_gpus_price_and_estimated_spend_with_one_get_per_resource(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    together.add_resource(RID, "READY")
    together.add(SID, "RUNNING", step="10", model_resources_id=RID)
    together.add(SID2, "RUNNING", step="20", model_resources_id=RID)
    bot = start_bot(SPEND_WATCH="true")
    roots = {
        "C123": subscribe(bot, slack, SID, "C123"),
        "C456": subscribe(bot, slack, SID2, "C456"),
    }

    for channel, root in roots.items():
        wait_until(lambda c=channel, r=root: "Spend so far" in card(slack, c, r), what="spend")
        shown = card(slack, channel, root)
        assert "H100-80GB" in shown and "1 generator replica" in shown
        assert "Ready (billing)" in shown
        assert "$25.00/h" in shown, shown  # the fake: $12.50 per H100 x (trainer + 1 replica)
        assert "estimate" in shown and "not Together's bill" in shown

    # `/rl-session <id>` of a watched session shows the same section.
    r = bot.command(SID, response_url=slack.response_url("show"), channel_id="C789")
    assert r.status_code == 200, r.text
    answer = r.text if r.content.strip() else json.dumps(slack.wait_for_response("show"))
    assert "H100-80GB" in answer and "$25.00/h" in answer and "Spend so far (estimate)" in answer

    # Both sessions are polled each cycle; their one resource is read once.
    before = [together.requests_for(i) for i in (SID, SID2, RID)]
    # At least three cycles, however long the request budget makes the interval.
    wait_until(
        lambda: (
            min(together.requests_for(i) - b for i, b in zip((SID, SID2), before[:2], strict=True))
            >= 3
        ),
        what="three polls of each session",
    )
    time.sleep(0.5)  # the cycle's resource read, after its sessions
    got, got2, resource = (
        together.requests_for(i) - b for i, b in zip((SID, SID2, RID), before, strict=True)
    )
    assert resource <= max(got, got2) + 1, (got, got2, resource)
    assert resource < got + got2 - 1, (got, got2, resource)
    # The price is asked once per resource shape, not every cycle.
    assert len(together.estimate_requests) == 1


def test_a_target_puts_steps_per_minute_and_an_eta_on_the_card(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID, "RUNNING", step="100")
    bot = start_bot()  # no spend watch: the target alone redraws the card
    token = "sub-target"
    r = bot.command(
        f"subscribe {SID} target=2,000", response_url=slack.response_url(token), channel_id="C123"
    )
    assert r.status_code == 200, r.text
    answer = r.text if r.content.strip() else json.dumps(slack.wait_for_response(token))
    assert "target step 2,000" in answer, answer
    assert query(db_url, "SELECT target_step FROM subscriptions") == [(2000,)]
    root = next(c.ts for c in slack.successful_posts("C123") if c.thread_ts is None and c.ts)
    move_until(together, lambda: "ETA" in card(slack, "C123", root), what="ETA on the card")
    shown = card(slack, "C123", root)
    assert "steps/min" in shown and "step 2,000, ETA" in shown
    assert "Spend so far" not in shown  # SPEND_WATCH is off


def test_every_root_redraw_keeps_the_watch_lines(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    """A Refresh, a checkpoint or a status change redraws the root card from the
    same watch state as the spend and ETA redraws: resource, price, spend,
    steps/min and the target stay on it (the ETA too while the session runs)."""
    from bot.simulated.together import make_session

    together.add_resource(RID, "READY")
    together.add(SID, "RUNNING", step="100", model_resources_id=RID)
    bot = start_bot(SPEND_WATCH="true")
    token = "sub-all"
    r = bot.command(
        f"subscribe {SID} status checkpoints target=2000",
        response_url=slack.response_url(token),
        channel_id="C123",
    )
    assert r.status_code == 200, r.text
    answer = r.text if r.content.strip() else json.dumps(slack.wait_for_response(token))
    assert "Subscribed" in answer, answer
    root = next(c.ts for c in slack.successful_posts("C123") if c.thread_ts is None and c.ts)
    move_until(
        together,
        lambda: "ETA" in card(slack, "C123", root) and "Spend so far" in card(slack, "C123", root),
        what="ETA and spend on the card",
    )

    # Refresh on the root card redraws it with the same lines (and keeps Unsubscribe).
    latest = slack.updates("C123", root)[-1]
    r = bot.click(
        "rl_refresh",
        SID,
        response_url=slack.response_url("refresh"),
        message_ts=root,
        is_ephemeral=False,
        message={"ts": root, "text": "", "blocks": latest.blocks},
    )
    assert r.status_code == 200, r.text
    refreshed = json.dumps(slack.wait_for_response("refresh"), ensure_ascii=False)
    assert "rl_unsubscribe" in refreshed and "Ready (billing)" in refreshed
    assert "ETA" in refreshed and "step 2,000" in refreshed and "Spend so far" in refreshed

    # New checkpoints: told in the thread, and the root redrawn with them.
    more = make_session(SID, step="130", checkpoints=2)
    together.set_status(
        SID,
        "RUNNING",
        training_checkpoints=more["training_checkpoints"],
        inference_checkpoints=more["inference_checkpoints"],
    )

    def redraws(words: str) -> list[str]:
        return [
            json.dumps(u.blocks, ensure_ascii=False)
            for u in slack.updates("C123", root)
            if words in json.dumps(u.blocks, ensure_ascii=False)
        ]

    wait_until(lambda: redraws("training 2 · inference 2"), what="checkpoint redraw")
    for shown in redraws("training 2 · inference 2"):
        assert "ETA" in shown and "step 2,000" in shown, shown
        assert "Ready (billing)" in shown and "$25.00/h" in shown and "Spend so far" in shown
        assert "steps/min" in shown

    # A status change: the card says Stopping and keeps the resource and target lines.
    together.set_status(SID, "STOPPING")
    wait_until(lambda: redraws("Stopping"), what="status change redraw")
    for shown in redraws("Stopping"):
        assert "Ready (billing)" in shown and "$25.00/h" in shown and "Spend so far" in shown
        assert "steps/min" in shown and "step 2,000" in shown, shown
        assert "ETA" not in shown  # no ETA for a session that no longer runs


def test_the_spend_watch_is_on_when_the_setting_is_unset(
    launch_bot: BotLauncher, slack: FakeSlack, together: FakeTogether
) -> None:
    together.add_resource(RID, "READY")
    together.add(SID, "RUNNING", step="10", model_resources_id=RID)
    bot = launch_bot(unset=("SPEND_WATCH",))
    root = subscribe(bot, slack, SID, "C123")
    wait_until(lambda: "Ready (billing)" in card(slack, "C123", root), what="resource line")
    shown = card(slack, "C123", root)
    assert "H100-80GB" in shown and "$25.00/h" in shown, shown


def test_a_resource_is_read_once_within_its_refresh_however_many_cycles(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    """Two watched sessions on one resource, SPEND_REFRESH_SECONDS long: once both
    cards show it, several more cycles read it no more (no status changed)."""
    together.add_resource(RID, "READY")
    together.add(SID, "RUNNING", step="10", model_resources_id=RID)
    together.add(SID2, "RUNNING", step="20", model_resources_id=RID)
    bot = start_bot(SPEND_WATCH="true", SPEND_REFRESH_SECONDS="3600")
    roots = {
        "C123": subscribe(bot, slack, SID, "C123"),
        "C456": subscribe(bot, slack, SID2, "C456"),
    }
    for channel, root in roots.items():
        wait_until(
            lambda c=channel, r=root: "Ready (billing)" in card(slack, c, r), what="resource line"
        )
    # one read for the first subscription, at most one more for the second (new to the watch)
    first = together.requests_for(RID)
    assert 1 <= first <= 2, first
    before = [together.requests_for(i) for i in (SID, SID2)]
    wait_until(
        lambda: (
            min(together.requests_for(i) - b for i, b in zip((SID, SID2), before, strict=True)) >= 4
        ),
        what="four more polls of each session",
    )
    time.sleep(0.5)  # the last cycle's resource reads, after its sessions
    assert together.requests_for(RID) == first


def test_a_value_the_card_showed_before_is_drawn_again_when_it_comes_back(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    """Queue position 3, 2, 3, then 2 again: each is drawn (a redraw of a value the
    card showed before was dropped as a repeat of the first, and the card kept
    showing the value before it)."""
    together.add_resource(RID, "PENDING", queue_position=3)
    together.add(SID, "CREATING", step="0", model_resources_id=RID)
    bot = start_bot(SPEND_WATCH="true", SPEND_REFRESH_SECONDS="0")  # read every cycle
    root = subscribe(bot, slack, SID, "C123")

    def queue() -> str | None:
        updates = slack.updates("C123", root)
        [posted] = [c for c in slack.successful_posts("C123") if c.ts == root]
        shown = json.dumps(updates[-1].blocks if updates else posted.blocks)
        found = re.search(r"\*Queue position\*\\n(\d+)", shown)  # in JSON: "\\n"
        return found.group(1) if found else None

    for position in ("3", "2", "3", "2"):
        together.set_resource(RID, queue_position=int(position))
        wait_until(lambda p=position: queue() == p, what=f"queue position {position} shown")
