"""App Home opened as Slack sends it: a signed `app_home_opened` event."""

from __future__ import annotations

import json
import time
import uuid
from urllib.parse import urlencode

from bot.simulated import sign
from tests.support import SIGNING_SECRET, BotProcess
from tests.support.rig import Rig


def open_home(
    bot: BotProcess, user: str = "U123", event_id: str | None = None, tab: str = "home"
) -> None:
    """`event_id` None: a fresh one (Slack sends one per event; a repeated id is a retry)."""
    body = json.dumps(
        {
            "token": "x",
            "team_id": "T1",
            "api_app_id": "A1",
            "type": "event_callback",
            "event_id": event_id or f"Ev{uuid.uuid4().hex[:8]}",
            "event_time": 1,
            "event": {"type": "app_home_opened", "user": user, "channel": "D1", "tab": tab},
        }
    )
    headers = sign(SIGNING_SECRET, body) | {"Content-Type": "application/json"}
    assert bot.post(body, headers=headers).status_code == 200


def click_home(bot: BotProcess, action_id: str, value: str, user: str) -> None:
    """A block_actions payload from the Home tab: a view container, no channel."""
    payload = {
        "type": "block_actions",
        "user": {"id": user, "username": "u", "name": "u", "team_id": "T1"},
        "api_app_id": "A1",
        "token": "x",
        "container": {"type": "view", "view_id": "V1"},
        "trigger_id": "t.9",
        "team": {"id": "T1", "domain": "example"},
        "view": {"id": "V1", "type": "home", "blocks": [], "state": {"values": {}}},
        "actions": [
            {
                "action_id": action_id,
                "block_id": "b1",
                "text": {"type": "plain_text", "text": "x"},
                "value": value,
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    assert bot.post(urlencode({"payload": json.dumps(payload)})).status_code == 200


def home_views(rig: Rig, user: str) -> list[str]:
    return [
        str(c.params.get("view"))
        for c in rig.slack.successful("views.publish")
        if c.params.get("user_id") == user
    ]
