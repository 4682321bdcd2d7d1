"""The answers to a name that names no one session: several matches, each with
its id and a button that runs the same command with that id; or none. Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from bot.rendering.blocks import (
    MAX_BUTTON_VALUE,
    Message,
    button,
    context_block,
    message_of,
    section_block,
)
from bot.rendering.text import ID_LIMIT, NAME_LIMIT, code_span, inert
from bot.rendering.words import slack_date, status_emoji, status_words
from bot.training.sessions import TrainingSession

#: the action id of a match's button (numbered: action ids are unique in a message)
PICK = "rl_pick_session"
PICKED = re.compile(rf"^{re.escape(PICK)}\.\d+$")
#: matches shown, each its own section
MAX_MATCHES = 10
_ECHO = 41


def no_session_named(word: str, *, complete: bool = True) -> Message:
    """No session has this name (or id). `word` as the person typed it (Slack's
    escapes undone): it is escaped here, once."""
    where = "" if complete else " among the newest sessions I read"
    text = (
        f":mag: No session named {code_span(word, _ECHO)}{where}; `/rl-session ls all` lists them."
    )
    return message_of(text, [section_block(text)])


def sessions_named(
    word: str, matches: Sequence[TrainingSession], commands: Sequence[str | None]
) -> Message:
    """Several sessions have this name (`word` as typed, escaped here once): each
    with its status, id and creation, and a button that runs the command again
    with its id (`commands`, one per match; None, or a command too long for a
    button, shows no button)."""
    shown = list(zip(matches, commands, strict=True))[:MAX_MATCHES]
    head = (
        f":mag: {len(matches)} sessions are named {code_span(word, _ECHO)}. "
        "Pick one, or give its id:"
    )
    blocks: list[dict[str, Any]] = [section_block(head)]
    for number, (session, command) in enumerate(shown, start=1):
        line = (
            f"{status_emoji(session.status)} *{inert(session.display_name, NAME_LIMIT)}* "
            f"{code_span(session.id, ID_LIMIT)} · {status_words(session.status)}"
        )
        if session.created_at is not None:
            line += f" · created {slack_date(session.created_at)}"
        section = section_block(line)
        if command is not None and len(command) <= MAX_BUTTON_VALUE:
            section["accessory"] = button(f"Use {number}", f"{PICK}.{number}", value=command)
        blocks.append(section)
    if len(matches) > len(shown):
        blocks.append(context_block(f"…and {len(matches) - len(shown)} more: give the id."))
    return message_of(f"{len(matches)} sessions are named {inert(word, _ECHO)}; pick one", blocks)
