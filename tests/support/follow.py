"""Follow rules through a module's shared bot (`tests.support.rig`): session ids,
commands asked as a person, and what a channel holds once discovery has run."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from tests.support import wait_until
from tests.support.rig import Rig, ask

#: the people `CREATED_BY_USER_MAP` maps (ana and bob) for the follow tests' bots
USER_MAP = "user_ana=U123,user_bob=U456"
#: emptied before each follow test (the subscriptions' tables are emptied by `Rig.fresh`)
FOLLOW_TABLES = ("follow_rules", "follow_claims", "personal_watches", "personal_alerts", "jobs")


def sid(n: int) -> str:
    return f"{n:08x}-e89b-42d3-a456-426614174000"


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def say(rig: Rig, text: str, *, channel: str = "C123", user: str = "U123") -> str:
    """Run a command; the bot's answer as text (usage is answered in the ack itself)."""
    response, token = ask(rig, text, channel_id=channel, user_id=user)
    if response.content:
        return response.text
    return json.dumps(rig.slack.wait_for_response(token))


def subscribed(rig: Rig, channel: str) -> list[str]:
    rows = rig.query(
        "SELECT session_id FROM subscriptions WHERE channel_id = :c AND active ORDER BY id",
        c=channel,
    )
    return [r[0] for r in rows]


def roots(rig: Rig, channel: str) -> list[Any]:
    return [c for c in rig.slack.successful_posts(channel) if c.thread_ts is None]


def wait_subscribed(rig: Rig, channel: str, wanted: set[str]) -> None:
    wait_until(lambda: wanted <= set(subscribed(rig, channel)), what=f"{wanted} in {channel}")


def settle(rig: Rig) -> None:
    """Two discovery runs after now: what a rule would take, it has taken."""
    stamps: list[Any] = []

    def two_more() -> bool:
        rows = rig.query("SELECT last_run_at FROM jobs WHERE name = 'follow'")
        stamp = rows[0][0] if rows else None
        if not stamps or stamps[-1] != stamp:
            stamps.append(stamp)
        return len(stamps) >= 3

    wait_until(two_more, what="two discovery runs")
