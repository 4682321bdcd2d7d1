"""The daily digest through real `rl-bot serve` processes and the Slack- and
Together-shaped servers: it is due by the database's clock, not a replica's."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.fakes import FakeSlack
from tests.support import BotFactory, BotProcess, query, wait_until

pytestmark = pytest.mark.slow


def ask(bot: BotProcess, slack: FakeSlack, text: str, channel: str = "C123") -> str:
    """Run `/rl-session <text>`; its answer as text."""
    token = f"t-{uuid.uuid4().hex[:8]}"
    r = bot.command(text, response_url=slack.response_url(token), channel_id=channel)
    assert r.status_code == 200, r.text
    answer: Any = r.json() if r.content.strip() else slack.wait_for_response(token)
    return json.dumps(answer, ensure_ascii=False)


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
