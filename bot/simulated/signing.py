"""Talk to the bot the way Slack does: signed slash commands and block_actions payloads."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any
from urllib.parse import urlencode

import httpx

__all__ = [
    "block_action_body",
    "post_signed",
    "sign",
    "slash_command_body",
    "slash_command_payload",
]


def sign(secret: str, body: bytes | str, timestamp: int | None = None) -> dict[str, str]:
    """Headers Slack sends: `v0=` + hex HMAC-SHA256(secret, f"v0:{ts}:{body}")."""
    ts = int(time.time()) if timestamp is None else int(timestamp)
    raw = body.encode() if isinstance(body, str) else body
    base = b"v0:" + str(ts).encode() + b":" + raw
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/x-www-form-urlencoded",
    }


def slash_command_payload(
    text: str,
    *,
    command: str = "/rl-session",
    user_id: str = "U123",
    channel_id: str = "C123",
    team_id: str = "T1",
    response_url: str,
    trigger_id: str = "t.1",
    channel_name: str = "general",
    user_name: str = "alice",
    team_domain: str = "example",
    api_app_id: str = "A1",
) -> dict[str, str]:
    """The fields of a slash command as Slack sends them (over HTTP or in a socket envelope)."""
    return {
        "token": "verification-token-unused",
        "team_id": team_id,
        "team_domain": team_domain,
        "channel_id": channel_id,
        "channel_name": channel_name,
        "user_id": user_id,
        "user_name": user_name,
        "command": command,
        "text": text,
        "api_app_id": api_app_id,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id,
    }


def slash_command_body(text: str, *, response_url: str, **fields: str) -> str:
    """A urlencoded slash-command body as Slack POSTs it (fields as `slash_command_payload`)."""
    return urlencode(slash_command_payload(text, response_url=response_url, **fields))


def block_action_body(
    action_id: str,
    value: str,
    *,
    user_id: str = "U123",
    channel_id: str = "C123",
    team_id: str = "T1",
    response_url: str,
    message_ts: str | None = None,
    is_ephemeral: bool = False,
    message: dict[str, Any] | None = None,
    block_id: str = "actions",
    trigger_id: str = "t.2",
    user_name: str = "alice",
    channel_name: str = "general",
    team_domain: str = "example",
    action_ts: str | None = None,
) -> str:
    """`payload=<urlencoded JSON>` shaped like a real Slack `block_actions` interaction.

    For a non-ephemeral message the payload carries `message` ({ts, text, blocks} unless one is
    given); `message_ts` defaults to that message's ts, or a fixed one.
    """
    if message_ts is None:
        message_ts = str(message["ts"]) if message and message.get("ts") else "1700000001.000001"
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": user_id, "username": user_name, "name": user_name, "team_id": team_id},
        "api_app_id": "A1",
        "token": "verification-token-unused",
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel_id,
            "is_ephemeral": is_ephemeral,
        },
        "trigger_id": trigger_id,
        "team": {"id": team_id, "domain": team_domain},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel_id, "name": channel_name},
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [
            {
                "action_id": action_id,
                "block_id": block_id,
                "text": {"type": "plain_text", "text": action_id, "emoji": True},
                "value": value,
                "type": "button",
                "action_ts": action_ts or f"{time.time():.6f}",
            }
        ],
    }
    if not is_ephemeral:
        msg: dict[str, Any] = {
            "type": "message",
            "user": "UBOT",
            "bot_id": "B1",
            "ts": message_ts,
            "text": "",
            "blocks": [],
        }
        msg.update(message or {})
        payload["message"] = msg
    return urlencode({"payload": json.dumps(payload)})


async def post_signed(
    client: httpx.AsyncClient,
    url: str,
    body: str,
    secret: str,
    *,
    timestamp: int | None = None,
) -> httpx.Response:
    """POST `body` to `url` with a valid Slack signature (or one for `timestamp`)."""
    return await client.post(url, content=body.encode(), headers=sign(secret, body, timestamp))
