"""Answering a user after the ack: through response_url, or, if Slack says it
has expired, as an ephemeral message from the bot."""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.rendering import Message

log = logging.getLogger(__name__)


async def reply(
    respond: AsyncRespond | None,
    client: AsyncWebClient,
    *,
    channel_id: str | None,
    user_id: str | None,
    message: Message,
    in_channel: bool = False,
    replace_original: bool = False,
) -> None:
    kwargs: dict[str, Any] = {"text": message["text"], "blocks": message["blocks"]}
    if replace_original:
        kwargs["replace_original"] = True
    else:
        kwargs["response_type"] = "in_channel" if in_channel else "ephemeral"
    if respond is None:  # no response_url (App Home): only the fallback, if anywhere
        if channel_id and user_id:
            await _post(client, channel_id, user_id, message, in_channel=in_channel)
        return
    status = 0
    try:
        response = await respond(**kwargs)
        status = response.status_code
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        log.warning("response_url unreachable: %s", type(exc).__name__)
    if 200 <= status < 300:
        return
    log.warning(
        "response_url answered %s; falling back to chat.postEphemeral",
        status,
        extra={"channel_id": channel_id},
    )
    if not channel_id or not user_id:
        return
    await _post(client, channel_id, user_id, message, in_channel=in_channel)


async def _post(
    client: AsyncWebClient, channel_id: str, user_id: str, message: Message, *, in_channel: bool
) -> None:
    try:
        if in_channel:
            await client.chat_postMessage(channel=channel_id, **_plain(message))
        else:
            await client.chat_postEphemeral(channel=channel_id, user=user_id, **_plain(message))
    except SlackApiError as exc:
        log.warning(
            "could not answer the user: %s",
            exc.response.get("error"),
            extra={"channel_id": channel_id},
        )


def _plain(message: Message) -> dict[str, Any]:
    return {"text": message["text"], "blocks": message["blocks"]}
