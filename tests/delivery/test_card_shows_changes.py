"""A root card shows a change a person made at once, and a muted thread stays
quiet whenever its rows were queued: signed commands into a real bot, what the
Slack-shaped server got."""

from __future__ import annotations

import json
import time

import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.support import BotProcess, wait_until

SID = "7e1c0000-e89b-42d3-a456-426614174000"


def _subscribe(bot: BotProcess, slack: FakeSlack, channel: str = "C123") -> str:
    bot.command(f"subscribe {SID}", response_url=slack.response_url("sub"), channel_id=channel)
    assert "Subscribed" in str(slack.wait_for_response("sub"))
    [root] = [c.ts for c in slack.successful_posts(channel) if c.thread_ts is None]
    assert root is not None
    return root


def _card(slack: FakeSlack, root: str) -> str:
    updates = slack.updates("C123", root)
    return json.dumps(updates[-1].blocks) if updates else ""


@pytest.mark.backend_independent(
    "the redraw's order is the queue's, tested on both in tests/outbox"
)
def test_a_budget_rule_and_mute_show_on_a_still_sessions_card_within_seconds(
    start_bot: object, slack: FakeSlack, together: FakeTogether
) -> None:
    together.add(SID)  # its step never moves: no routine redraw will come
    bot: BotProcess = start_bot(SPEND_WATCH="true")  # type: ignore[operator]
    root = _subscribe(bot, slack)
    wait_until(lambda: "Spend so far" in _card(slack, root), timeout=30, what="the card's spend")
    time.sleep(2)  # the card has settled: what follows is the commands' doing

    for text, shown in [
        (f"budget {SID} $100", "of $100"),
        (f"alert {SID} kl > 8", "kl &gt; 8"),
        (f"mute {SID} 30m", "Muted until"),
    ]:
        asked = time.monotonic()
        response = bot.command(text, response_url=slack.response_url(text))
        assert response.status_code == 200
        wait_until(lambda s=shown: s in _card(slack, root), timeout=10, what=f"{text} shown")  # type: ignore[misc]
        print(f"{text!r}: on the card {time.monotonic() - asked:.1f}s after the command")


@pytest.mark.backend_independent("the mute is read at the send, the same on both databases")
def test_a_thread_muted_after_its_row_was_queued_hears_nothing(
    start_bot: object, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID)
    bot: BotProcess = start_bot()  # type: ignore[operator]
    root = _subscribe(bot, slack)
    # Slack is failing for that thread's news: the change is queued, and waits
    in_thread = lambda p: p.get("thread_ts") == root and "Stopping" in str(p)  # noqa: E731
    fault = slack.fail_next("chat.postMessage", status=503, times=1000, when=in_thread)
    together.set_status(SID, "STOPPING")
    wait_until(
        lambda: any(c.status == 503 for c in slack.calls_to("chat.postMessage")),
        what="the change tried once",
    )
    bot.command(f"mute {SID} 1h", response_url=slack.response_url("mute"))
    wait_until(
        lambda: any("muted" in str(c.text).lower() for c in slack.posts_in_thread("C123", root)),
        what="the mute said in the thread",
    )
    fault.remaining = 0  # Slack is back
    slack.clear_failures()
    wait_until(lambda: "Stopping" in _card(slack, root), timeout=30, what="the card shows it")
    time.sleep(2)
    told = [c for c in slack.posts_in_thread("C123", root) if "Stopping" in str(c.params)]
    assert told == [], "a muted thread heard a change queued before the mute"
