"""What every message the bot renders must be, whatever went into it: valid
Block Kit with a fallback text, and inert (no mention, link or date token that
the bot did not put there itself)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from bot.rendering import Message
from tests.block_kit import block_kit_problems

PERMALINK = "https://example.slack.com/archives/C0123/p1700000000000100?thread_ts=1700000000.000100&cid=C0123"
PERMALINK_TOKEN = "<" + PERMALINK.replace("&", "&amp;") + "|View thread>"
MENTION = "<!subteam^S0123ABC>"

INJECTIONS = [
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<@U123>",
    "<#C123>",
    "<!subteam^S0123>",
    "<https://evil.example|click>",
    "<!date^1^{date}|x>",
    "&lt;",
    "&amp;lt;!channel&gt;",
    "&",
    "`",
    "*",
    "\x1b[31m",
    "\u202e",
    "\r\n",
    "\x00",
]

TRUSTED_MENTION_RE = re.compile(r"^<(!subteam\^[A-Z0-9]+|!here|!channel|@[UW][A-Z0-9]+)>$")

# Our own tokens, allowed to remain; everything else `<` must have been escaped.
DATE_TOKEN_RE = re.compile(r"<!date\^-?\d+\^\{date_short_pretty\} at \{time\}\|[^<>]*>")


def text_fields(node: Any) -> Iterator[str]:
    """Every string Slack parses as text: `text` values at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "text" and isinstance(value, str):
                yield value
            else:
                yield from text_fields(value)
    elif isinstance(node, list):
        for item in node:
            yield from text_fields(item)


def assert_inert(message: Message, *trusted: str) -> None:
    """No live mention or link from inputs: after removing our date tokens and
    the trusted tokens we inserted, no `<` or `>` is left in any text."""
    for text in text_fields(message):
        rest = DATE_TOKEN_RE.sub("", text)
        for token in trusted:
            rest = rest.replace(token, "")
        assert "<" not in rest and ">" not in rest, text[:500]
    dumped = json.dumps(message, ensure_ascii=False)
    for token in trusted:
        dumped = dumped.replace(token, "")
    for bad in ("<!channel>", "<!here>", "<!everyone>", "<@U123>", "<https://evil", "<#C123>"):
        assert bad not in dumped


def assert_valid(message: Message) -> None:
    assert block_kit_problems(message) == []
    assert isinstance(message["text"], str) and message["text"].strip()


def buttons(message: Message) -> dict[str, dict[str, Any]]:
    found = {}
    for block in message["blocks"]:
        if block["type"] == "actions":
            for element in block["elements"]:
                found[element["action_id"]] = element
    return found
