"""Slack messages as plain text for a terminal: `rl-bot show <id>` prints the
card this way, a first check of the API key without Slack."""

from __future__ import annotations

import re
from typing import Any

from bot.rendering.blocks import Message
from bot.rendering.text import CLEAN_TABLE, TOKEN_RE, WORD_JOINER

_ENTITY_RE = re.compile(r"&(amp|lt|gt);")


def _token_text(match: re.Match[str]) -> str:
    inner = match.group(1)
    if inner.startswith("!date^"):
        return inner.split("|", 1)[1] if "|" in inner else inner.split("^")[1]
    target, _, label = inner.partition("|")
    if target.startswith("@"):
        return label or target
    if target.startswith("!subteam^"):
        return label or "@" + target.removeprefix("!subteam^")
    if target.startswith("!"):
        return label or "@" + target[1:]
    if target.startswith("#"):
        return "#" + label if label else target
    return f"{label} ({target})" if label else target


def _plain_from_mrkdwn(text: str) -> str:
    """Tokens to readable text, then entities back to characters (one pass, so
    `&amp;lt;` becomes `&lt;` and not `<`)."""
    untokened = TOKEN_RE.sub(_token_text, text)
    untokened = untokened.replace(WORD_JOINER, "")
    unescaped = _ENTITY_RE.sub(lambda m: {"amp": "&", "lt": "<", "gt": ">"}[m.group(1)], untokened)
    # escape() already dropped control characters from API values; repeat it so
    # nothing in a message can send escape sequences to a terminal.
    return unescaped.translate(CLEAN_TABLE)


def _text_of(obj: Any) -> str:
    if isinstance(obj, dict) and isinstance(obj.get("text"), str):
        return _plain_from_mrkdwn(obj["text"])
    return ""


def as_text(message: Message) -> str:
    """Render a message for a terminal (`rl-bot show <id>`)."""
    blocks = message.get("blocks") or []
    if not blocks:
        return _plain_from_mrkdwn(str(message.get("text", "")))
    out: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "header":
            title = _text_of(block.get("text"))
            out += [title, "=" * min(len(title), 80)]
        elif kind == "section":
            if block.get("text"):
                out.append(_text_of(block["text"]))
            for field in block.get("fields") or []:
                label, _, value = _text_of(field).partition("\n")
                label = label[1:-1] if len(label) > 1 and label[0] == label[-1] == "*" else label
                out.append(f"{label}: {value}" if value else label)
        elif kind == "context":
            out.append(" · ".join(_text_of(e) for e in block.get("elements") or []))
        elif kind == "actions":
            buttons = []
            for element in block.get("elements") or []:
                label = _text_of(element.get("text"))
                url = element.get("url")
                buttons.append(f"[{label}] {url}" if url else f"[{label}]")
            out.append("  ".join(buttons))
        elif kind == "divider":
            out.append("-" * 40)
    return "\n".join(out)
