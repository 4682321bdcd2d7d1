"""The `/rl-session` grammar, parsed without I/O.

`/rl-session <id>` shows a card; `subscribe <id>`, `unsubscribe <id>`, `list`
and `help` do what they say. Anything else is answered with usage, never sent
to Together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.models import is_session_id

Verb = Literal["show", "subscribe", "unsubscribe", "list", "help"]
MAX_COMMAND_TEXT = 4000


@dataclass(frozen=True)
class Command:
    verb: Verb
    session_id: str | None = None
    problem: str | None = None  # set when the text cannot be acted on


def parse(text: str | None) -> Command:
    words = (text or "")[:MAX_COMMAND_TEXT].split()
    if not words:
        return Command("help")
    head = words[0].lower()
    if head in ("help", "-h", "--help", "?"):
        return Command("help")
    if head == "list":
        if len(words) > 1:
            return Command("list", problem="`list` takes no arguments.")
        return Command("list")
    if head in ("subscribe", "unsubscribe", "show"):
        verb: Verb = "show" if head == "show" else head  # type: ignore[assignment]
        if len(words) != 2:
            return Command(verb, problem=f"`{head}` takes exactly one session id.")
        return _with_id(verb, words[1])
    if len(words) > 1:
        return Command("help", problem="I did not understand that.")
    return _with_id("show", words[0])


def _with_id(verb: Verb, candidate: str) -> Command:
    if not is_session_id(candidate):
        return Command(verb, problem="invalid_id")
    return Command(verb, session_id=candidate)
