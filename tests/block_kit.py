"""Block Kit's limits, checked on what the renderers build: a message over any
of them is rejected whole by Slack (invalid_blocks), so the tests hold every
renderer to this. Nothing in the bot calls it; the renderers cut to the same
limits (bot/rendering/blocks.py) as they build."""

from __future__ import annotations

from typing import Any

from bot.rendering.blocks import (
    MAX_ACTION_ELEMENTS,
    MAX_ACTION_ID,
    MAX_BLOCKS,
    MAX_BUTTON_TEXT,
    MAX_BUTTON_URL,
    MAX_BUTTON_VALUE,
    MAX_CONTEXT_ELEMENTS,
    MAX_CONTEXT_TEXT,
    MAX_FALLBACK_TEXT,
    MAX_FIELD_TEXT,
    MAX_FIELDS,
    MAX_HEADER_TEXT,
    MAX_SECTION_TEXT,
    Message,
)
from bot.rendering.text import slack_len


def _check_text(
    obj: Any, where: str, limit: int, problems: list[str], *, plain: bool = False
) -> None:
    if not isinstance(obj, dict):
        problems.append(f"{where}: text object missing")
        return
    kind, text = obj.get("type"), obj.get("text")
    if kind not in ("plain_text", "mrkdwn"):
        problems.append(f"{where}: text type {kind!r} is not plain_text or mrkdwn")
    elif plain and kind != "plain_text":
        problems.append(f"{where}: must be plain_text")
    if not isinstance(text, str) or not text.strip():
        problems.append(f"{where}: text is empty")
    elif slack_len(text) > limit:
        problems.append(f"{where}: text is {slack_len(text)} characters, limit {limit}")


def _check_actions(block: dict[str, Any], where: str, problems: list[str], seen: set[str]) -> None:
    elements = block.get("elements")
    if not isinstance(elements, list) or not elements:
        problems.append(f"{where}: actions block has no elements")
        return
    if len(elements) > MAX_ACTION_ELEMENTS:
        problems.append(f"{where}: {len(elements)} elements, limit {MAX_ACTION_ELEMENTS}")
    for j, element in enumerate(elements):
        at = f"{where}.elements[{j}]"
        if not isinstance(element, dict):
            problems.append(f"{at}: not an object")
            continue
        _check_text(element.get("text"), f"{at}.text", MAX_BUTTON_TEXT, problems, plain=True)
        action_id = element.get("action_id")
        if action_id is not None:
            if not isinstance(action_id, str) or not action_id or len(action_id) > MAX_ACTION_ID:
                problems.append(f"{at}: bad action_id {action_id!r}")
            elif action_id in seen:
                problems.append(f"{at}: action_id {action_id!r} is not unique")
            else:
                seen.add(action_id)
        for key, limit in (("value", MAX_BUTTON_VALUE), ("url", MAX_BUTTON_URL)):
            value = element.get(key)
            if value is not None and (not isinstance(value, str) or slack_len(value) > limit):
                problems.append(f"{at}: {key} longer than {limit} characters or not a string")


def block_kit_problems(message: Message) -> list[str]:
    """Every Block Kit limit the message breaks, as readable problems (none: [])."""
    problems: list[str] = []
    text = message.get("text")
    if not isinstance(text, str) or not text.strip():
        problems.append("text fallback is missing or empty")
    elif slack_len(text) > MAX_FALLBACK_TEXT:
        problems.append(f"text fallback is {slack_len(text)} characters, limit {MAX_FALLBACK_TEXT}")
    blocks = message.get("blocks", [])
    if not isinstance(blocks, list):
        return [*problems, "blocks is not a list"]
    if len(blocks) > MAX_BLOCKS:
        problems.append(f"{len(blocks)} blocks, limit {MAX_BLOCKS}")
    seen_actions: set[str] = set()
    for i, block in enumerate(blocks):
        where = f"blocks[{i}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(block, dict):
            problems.append(f"{where}: not an object")
        elif kind == "header":
            _check_text(block.get("text"), f"{where}.text", MAX_HEADER_TEXT, problems, plain=True)
        elif kind == "section":
            fields = block.get("fields")
            if "text" not in block and not fields:
                problems.append(f"{where}: section has neither text nor fields")
            if "text" in block:
                _check_text(block["text"], f"{where}.text", MAX_SECTION_TEXT, problems)
            if fields is not None:
                if not isinstance(fields, list) or not fields or len(fields) > MAX_FIELDS:
                    count = len(fields) if isinstance(fields, list) else "bad"
                    problems.append(f"{where}: {count} fields, allowed 1 to {MAX_FIELDS}")
                else:
                    for j, field in enumerate(fields):
                        _check_text(field, f"{where}.fields[{j}]", MAX_FIELD_TEXT, problems)
        elif kind == "context":
            elements = block.get("elements")
            if not isinstance(elements, list) or not elements:
                problems.append(f"{where}: context block has no elements")
            else:
                if len(elements) > MAX_CONTEXT_ELEMENTS:
                    problems.append(
                        f"{where}: {len(elements)} context elements, limit {MAX_CONTEXT_ELEMENTS}"
                    )
                for j, element in enumerate(elements):
                    if isinstance(element, dict) and element.get("type") == "image":
                        continue
                    _check_text(element, f"{where}.elements[{j}]", MAX_CONTEXT_TEXT, problems)
        elif kind == "actions":
            _check_actions(block, where, problems, seen_actions)
        elif kind != "divider":
            problems.append(f"{where}: unexpected block type {kind!r}")
    return problems
