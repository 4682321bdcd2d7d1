"""App Home opened as Slack sends it: a signed `app_home_opened` event."""

from __future__ import annotations

import json

from tests.fakes import sign
from tests.support import SIGNING_SECRET, BotProcess


def open_home(
    bot: BotProcess, user: str = "U123", event_id: str = "Ev1", tab: str = "home"
) -> None:
    body = json.dumps(
        {
            "token": "x",
            "team_id": "T1",
            "api_app_id": "A1",
            "type": "event_callback",
            "event_id": event_id,
            "event_time": 1,
            "event": {"type": "app_home_opened", "user": user, "channel": "D1", "tab": tab},
        }
    )
    headers = sign(SIGNING_SECRET, body) | {"Content-Type": "application/json"}
    assert bot.post(body, headers=headers).status_code == 200
