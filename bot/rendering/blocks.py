"""Block Kit: the pieces every Slack message is built from, each cut to
Slack's documented limits, and the action ids our buttons carry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.rendering.text import defuse, one_line, truncate

Message = dict[str, Any]
"""A chat.postMessage payload: "text" (plain fallback, never empty) and "blocks"."""

# Slack's documented Block Kit limits.
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_FIELDS = 10
MAX_FIELD_TEXT = 2000
MAX_HEADER_TEXT = 150
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_BUTTON_URL = 3000
MAX_ACTION_ID = 255
MAX_ACTION_ELEMENTS = 25
MAX_CONTEXT_ELEMENTS = 10
MAX_CONTEXT_TEXT = 3000
MAX_FALLBACK_TEXT = 40000

# Our own, tighter budget for the fallback (a notification's preview).
FALLBACK_LIMIT = 3000

# The buttons' action ids; `bot.slack.listeners` registers a handler for each.
SUBSCRIBE = "rl_subscribe"
UNSUBSCRIBE = "rl_unsubscribe"
REFRESH = "rl_refresh"
CHART = "rl_chart"
WANDB = "rl_wandb"
STOP = "rl_stop"
HOME_UNSUBSCRIBE = "rl_home_unsubscribe"
HOME_PERSONAL = "rl_home_personal"


def plain_text(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": True}


def mrkdwn(text: str) -> dict[str, Any]:
    # verbatim: Slack would otherwise link bare URLs and channel names and parse
    # some mentions in API text; our own `<…>` tokens still work.
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def header_block(text: str) -> dict[str, Any]:
    return {"type": "header", "text": plain_text(truncate(text, MAX_HEADER_TEXT))}


def section_block(text: str) -> dict[str, Any]:
    return {"type": "section", "text": mrkdwn(truncate(text, MAX_SECTION_TEXT))}


def fields_block(pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    fields = [mrkdwn(truncate(f"*{label}*\n{value}", MAX_FIELD_TEXT)) for label, value in pairs]
    return {"type": "section", "fields": fields[:MAX_FIELDS]}


def context_block(*texts: str) -> dict[str, Any]:
    elements = [mrkdwn(truncate(t, MAX_CONTEXT_TEXT)) for t in texts if t]
    return {"type": "context", "elements": elements[:MAX_CONTEXT_ELEMENTS]}


def button(
    label: str,
    action_id: str,
    *,
    value: str | None = None,
    url: str | None = None,
    style: str | None = None,
) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "button", "text": plain_text(label), "action_id": action_id}
    if value is not None:
        element["value"] = value
    if url is not None:
        element["url"] = url
    if style is not None:
        element["style"] = style
    return element


def message_of(fallback: str, blocks: list[dict[str, Any]]) -> Message:
    """The payload: blocks within the limit, and a one-line fallback that cannot autolink."""
    text = truncate(defuse(one_line(fallback)), FALLBACK_LIMIT) or "rl-bot"
    return {"text": text, "blocks": blocks[:MAX_BLOCKS]}
