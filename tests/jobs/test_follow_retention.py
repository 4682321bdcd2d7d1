"""Retention of follow claims through a real `rl-bot serve`: a claim past
retention is kept while its session is live (a channel that unsubscribed is not
subscribed again by its rule), and dropped once the session left the live list."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.support import BotFactory, query, wait_until

pytestmark = pytest.mark.slow

LIVE = "1a3e4567-e89b-12d3-a456-426614174000"
ENDED = "2a3e4567-e89b-12d3-a456-426614174000"
LONG_AGO = datetime(2000, 1, 1)


def test_a_claim_is_kept_while_its_session_lives(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(LIVE, "RUNNING")
    together.add(ENDED, "STOPPED")
    query(
        db_url,
        "INSERT INTO follow_rules (team_id, channel_id, selector, model, filters, existing, "
        "created_by, created_at, active) VALUES ('T1', 'CRET', 'all', '', 'status', :t, "
        "'U123', :c, :t)",
        t=True,
        c=datetime(2020, 1, 1),
    )
    # the channel unsubscribed from the live session long ago
    query(
        db_url,
        "INSERT INTO subscriptions (team_id, channel_id, session_id, root_ts, subscribed_by, "
        "created_at, active, ended_at, filters) VALUES ('T1', 'CRET', :s, '1.000', 'U123', "
        ":old, :f, :old, 'status')",
        s=LIVE,
        old=LONG_AGO,
        f=False,
    )
    for session_id in (LIVE, ENDED):
        query(
            db_url,
            "INSERT INTO follow_claims (team_id, channel_id, session_id, rule_id, claimed_by, "
            "claimed_at) VALUES ('T1', 'CRET', :s, 1, 'old', :old)",
            s=session_id,
            old=LONG_AGO,
        )
    start_bot()  # retention runs at start, then hourly
    wait_until(
        lambda: query(db_url, "SELECT count(*) FROM subscriptions") == [(0,)],
        what="the ended subscription pruned",
    )
    wait_until(
        lambda: query(db_url, "SELECT session_id FROM follow_claims") == [(LIVE,)],
        what="the ended session's claim pruned",
    )
    stamps: list[object] = []

    def runs(n: int) -> bool:
        rows = query(db_url, "SELECT last_run_at FROM jobs WHERE name = 'follow'")
        if rows and (not stamps or stamps[-1] != rows[0][0]):
            stamps.append(rows[0][0])
        return len(stamps) > n

    wait_until(lambda: runs(3), what="three discovery runs")
    assert query(db_url, "SELECT count(*) FROM subscriptions") == [(0,)]
    assert not [c for c in slack.calls_to("chat.postMessage") if LIVE in json.dumps(c.blocks)]
    assert query(db_url, "SELECT session_id FROM follow_claims") == [(LIVE,)]
