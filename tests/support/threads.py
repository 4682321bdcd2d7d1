"""A channel subscribed through the real bot, and the notifications its thread got."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.fakes import FakeSlack
from tests.support import BotProcess

SID = "123e4567-e89b-12d3-a456-426614174000"


def subscribe(bot: BotProcess, slack: FakeSlack, channel: str, sid: str = SID) -> str:
    """Subscribe `channel` to `sid`; return its root message ts."""
    token = f"sub-{channel}-{sid}-{uuid.uuid4().hex[:4]}"
    bot.command(f"subscribe {sid}", response_url=slack.response_url(token), channel_id=channel)
    return subscribed_root(slack, token, channel, sid)


def subscribed_root(slack: FakeSlack, token: str, channel: str, sid: str) -> str:
    """Once the subscribe command answered under `token`: the ts of `sid`'s root card."""
    assert "Subscribed" in json.dumps(slack.wait_for_response(token))
    [root] = [
        c.ts
        for c in slack.successful_posts(channel)
        if c.thread_ts is None and sid in json.dumps(c.blocks)
    ]
    assert root is not None
    return root


def notifications(slack: FakeSlack, channel: str, root: str | None = None) -> list[Any]:
    """Posts that delivery made (they carry the dedupe key in their metadata)."""
    return [
        c
        for c in slack.successful_posts(channel)
        if (root is None or c.thread_ts == root)
        and (c.metadata or {}).get("event_type") == "rl_bot_notification"
    ]
