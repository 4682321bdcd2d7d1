"""The daily digest through real `rl-bot serve` processes and the Slack- and
Together-shaped servers: it counts status changes only (not the root card's
redraws), and it is due by the database's clock, not a replica's."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.support import BotFactory, BotProcess, query, wait_until

pytestmark = pytest.mark.slow

SID = "5d3e4567-e89b-12d3-a456-426614174000"
SID2 = "6d3e4567-e89b-12d3-a456-426614174000"
RID = "7d3e4567-e89b-12d3-a456-426614174000"


def ask(bot: BotProcess, slack: FakeSlack, text: str, channel: str = "C123") -> str:
    """Run `/rl-session <text>`; its answer as text."""
    token = f"t-{uuid.uuid4().hex[:8]}"
    r = bot.command(text, response_url=slack.response_url(token), channel_id=channel)
    assert r.status_code == 200, r.text
    answer: Any = r.json() if r.content.strip() else slack.wait_for_response(token)
    return json.dumps(answer, ensure_ascii=False)


def subscribe(bot: BotProcess, slack: FakeSlack, sid: str) -> str:
    assert "Subscribed" in ask(bot, slack, f"subscribe {sid}")
    return [
        c.ts
        for c in slack.successful_posts("C123")
        if c.thread_ts is None and c.ts and sid in json.dumps(c.blocks)
    ][-1]


def card(slack: FakeSlack, root: str) -> str:
    updates = slack.updates("C123", root)
    return json.dumps(updates[-1].blocks, ensure_ascii=False) if updates else ""


def digests(slack: FakeSlack) -> list[str]:
    return [
        (c.text or "") + json.dumps(c.blocks or [], ensure_ascii=False)
        for c in slack.successful_posts("C123")
        if c.thread_ts is None and "Daily digest" in (c.text or "")
    ]


def now_minute() -> str:
    """The current UTC minute, not about to roll over into the next day."""
    now = datetime.now(UTC)
    if now.hour == 23 and now.minute == 59:
        time.sleep(61 - now.second)
    return datetime.now(UTC).strftime("%H:%M")


def test_the_digest_counts_status_changes_not_card_redraws(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    """The spend watch redraws a card (a `card` row) and a muted thread's status
    change is shown on its card only (a `root` row): the digest counts the change,
    not the redraws."""
    together.add_resource(RID, "READY")
    together.add(SID, "RUNNING", model_resources_id=RID, display_name="steady-run")
    together.add(SID2, "RUNNING", display_name="moving-run")
    bot = start_bot(SPEND_WATCH="true")
    root = subscribe(bot, slack, SID)
    root2 = subscribe(bot, slack, SID2)
    wait_until(lambda: "Spend so far" in card(slack, root), what="the spend redraw")
    assert "muted" in ask(bot, slack, f"mute {SID2} 2h")
    together.set_status(SID2, "STOPPING")
    wait_until(lambda: "Stopping" in card(slack, root2), what="the muted change on its card")
    redraws = query(
        db_url, "SELECT count(*) FROM outbox WHERE kind = 'card' AND dedupe_key LIKE 'watch:%'"
    )
    assert redraws[0][0] >= 1  # what the digest counted as changes

    at = now_minute()
    assert f"daily digest at {at} (UTC)" in ask(bot, slack, f"digest on {at}")
    bot.stop()
    start_bot(SPEND_WATCH="true")  # a new replica's digest tick runs at once
    wait_until(lambda: digests(slack), timeout=20, what="the digest")
    [digest] = digests(slack)
    assert "2 watched sessions, 1 change." in digest, digest
    assert "Running → Stopping" in digest and "Running → Running" not in digest


def test_the_digest_is_due_by_the_database_clock(
    start_bot: BotFactory, slack: FakeSlack, db_url: str
) -> None:
    """A replica whose clock is 1 h 2 min ahead still sends a digest due now
    (by its own clock the digest's hour would be over)."""
    skew = {"FAULT_CLOCK_SKEW_SECONDS": "3720"}
    bot = start_bot(**skew)
    at = now_minute()
    ask(bot, slack, f"digest on {at}")
    bot.stop()
    start_bot(**skew)
    wait_until(lambda: digests(slack), timeout=20, what="the digest")
    today = datetime.now(UTC).date().isoformat()
    assert today in digests(slack)[0]
    assert query(db_url, "SELECT last_digest_on FROM channel_settings") == [(today,)]
