"""What the page sends the bot, shaped and signed as Slack sends it: slash commands,
`block_actions` from a message, an ephemeral answer or App Home, and the
`app_home_opened` event. The bot cannot tell these from Slack's own.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any
from urllib.parse import urlencode

from pydantic import AfterValidator, BaseModel

from bot.demo.workspace import CHANNELS, NAMES, PEOPLE, TEAM_ID
from bot.simulated.signing import sign, slash_command_body
from bot.simulated.slack import APP_ID, BOT_ID, BOT_USER_ID


def _one_of_the_people(user: str) -> str:
    if user not in {person.id for person in PEOPLE}:
        raise ValueError("not one of the demo's people")
    return user


#: who the page acts as: one of the demo's people (the page draws the id it is given)
PersonId = Annotated[str, AfterValidator(_one_of_the_people)]


class Click(BaseModel):
    """A button pressed on the page: the button as drawn, and where it was."""

    user: PersonId
    action_id: str
    value: str = ""
    block_id: str = ""
    text: str = ""
    channel: str | None = None  # None on App Home
    message_ts: str | None = None
    ephemeral: str | None = None  # the ephemeral answer it was on
    thread_ts: str | None = None
    #: the message (or Home view) it was on, as the page got it
    blocks: list[dict[str, Any]] = []


def command_body(text: str, *, user: str, channel: str, response_url: str) -> str:
    return slash_command_body(
        text,
        user_id=user,
        user_name=NAMES.get(user, user),
        channel_id=channel,
        channel_name=CHANNELS.get(channel, "directmessage"),
        team_id=TEAM_ID,
        response_url=response_url,
        trigger_id=f"{time.time():.6f}.demo",
    )


def click_body(click: Click, *, response_url: str | None) -> str:
    """A `block_actions` payload as Slack posts it for a button in a message or on Home."""
    user = {"id": click.user, "username": NAMES.get(click.user, click.user), "team_id": TEAM_ID}
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {**user, "name": user["username"]},
        "api_app_id": APP_ID,
        "token": "verification-token-unused",
        "trigger_id": f"{time.time():.6f}.demo",
        "team": {"id": TEAM_ID, "domain": "demo"},
        "enterprise": None,
        "is_enterprise_install": False,
        "state": {"values": {}},
        "actions": [
            {
                "action_id": click.action_id,
                "block_id": click.block_id,
                "text": {"type": "plain_text", "text": click.text, "emoji": True},
                "value": click.value,
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    if click.channel is None:
        view = {"id": f"V{click.user}", "type": "home", "blocks": click.blocks}
        payload["container"] = {"type": "view", "view_id": view["id"]}
        payload["view"] = view
        return urlencode({"payload": json.dumps(payload)})
    ts = click.message_ts or f"{time.time():.6f}"
    payload["container"] = {
        "type": "message",
        "message_ts": ts,
        "channel_id": click.channel,
        "is_ephemeral": click.ephemeral is not None,
    }
    payload["channel"] = {"id": click.channel, "name": CHANNELS.get(click.channel, "dm")}
    payload["response_url"] = response_url
    if click.ephemeral is None:
        message: dict[str, Any] = {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "ts": ts,
            "text": "",
            "blocks": click.blocks,
        }
        if click.thread_ts:
            message["thread_ts"] = click.thread_ts
        payload["message"] = message
    return urlencode({"payload": json.dumps(payload)})


def home_opened_body(user: str) -> str:
    return json.dumps(
        {
            "token": "verification-token-unused",
            "team_id": TEAM_ID,
            "api_app_id": APP_ID,
            "type": "event_callback",
            "event_id": f"Ev{int(time.time() * 1000)}",
            "event_time": int(time.time()),
            "event": {
                "type": "app_home_opened",
                "user": user,
                "channel": f"D{user}",
                "tab": "home",
                "event_ts": f"{time.time():.6f}",
            },
        }
    )


def signed(secret: str, body: str, *, json_body: bool = False) -> dict[str, str]:
    headers = sign(secret, body)
    if json_body:
        headers["Content-Type"] = "application/json"
    return headers
