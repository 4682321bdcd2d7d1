"""The `/rl-session ls` page: pure, no I/O.

Numbered rows of the org's sessions, a dozen to a section, each with what the
bot's watch knows of it (steps/min, stalled, its resource, an idle resource),
followed by their Subscribe / Stop buttons, and a More button when Together has
another page. Same rules as `bot.rendering`: every value from Together or a user
goes through its escaping, and the page stays inside Block Kit's limits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.rendering.blocks import (
    MAX_BLOCKS,
    MAX_BUTTON_TEXT,
    MAX_BUTTON_VALUE,
    MAX_SECTION_TEXT,
    STOP,
    SUBSCRIBE,
    Message,
    button,
    context_block,
    header_block,
    message_of,
    plain_text,
    section_block,
)
from bot.rendering.card import STOPPABLE, stop_button
from bot.rendering.text import code_span, inert, truncate
from bot.rendering.words import (
    duration_words,
    resource_status_words,
    status_emoji,
    status_words,
    step_words,
    timestamp,
)
from bot.training.resources import ModelResource
from bot.training.rules import rate_words
from bot.training.sessions import TrainingSession, is_session_id

LS_MORE = "rl_ls_more"
#: an `ls` row's buttons: the card's action ids and the row number (`rl_subscribe.7`)
ROW_SUBSCRIBE = re.compile(rf"^{re.escape(SUBSCRIBE)}\.\d+$")
ROW_STOP = re.compile(rf"^{re.escape(STOP)}\.\d+$")
#: one Together list page: `ls` shows at most this many rows per message
LS_PAGE = 100
#: rows per section (and per actions block of their buttons: 2 each, at most 25)
_LS_CHUNK = 12
#: a row's name and id are cut to this, so a dozen rows fit one section
_ROW_NAME = 60


@dataclass(frozen=True)
class SessionRow:
    """One `ls` row: the session, plus what the watch knows of it (when it does)."""

    session: TrainingSession
    rate: float | None = None
    resource: ModelResource | None = None
    stalled: bool = False
    idle_resource: bool = False


def _row_line(number: int, row: SessionRow, now: datetime) -> str:
    """Status first, so a cut (a very long name) never hides it or the flags."""
    s = row.session
    parts = [f"*{number}.* {status_emoji(s.status)} {status_words(s.status)}"]
    name = inert(s.display_name, _ROW_NAME, default="")
    parts.append(f"*{name}* {code_span(s.id, _ROW_NAME)}" if name else code_span(s.id, _ROW_NAME))
    if s.step is not None:
        parts.append(f"step {step_words(s.step)}")
    rate = rate_words(row.rate)
    if rate is not None:
        parts.append(rate)
    created, at = timestamp(s.created_at), timestamp(now)  # naive times are UTC
    if created is not None and at is not None:
        parts.append(f"age {duration_words(timedelta(seconds=at - created))}")
    if row.resource is not None:
        parts.append("resource " + resource_status_words(row.resource))
    if row.stalled:
        parts.append(":warning: stalled")
    if row.idle_resource:
        parts.append(":money_with_wings: idle resource")
    return " · ".join(parts)


def _row_buttons(number: int, row: SessionRow) -> list[dict[str, Any]]:
    """Subscribe, and Stop for a live session; the number ties them to their row
    (action ids must be unique in a message, so each carries it)."""
    s = row.session
    if not is_session_id(s.id):
        return []
    buttons = [button(f"Subscribe {number}", f"{SUBSCRIBE}.{number}", value=s.id)]
    if s.status_enum in STOPPABLE:
        stop = stop_button(s)
        stop["text"] = plain_text(f"Stop {number}")
        stop["action_id"] = f"{stop['action_id']}.{number}"
        buttons.append(stop)
    return buttons


def session_list_page(
    rows: Sequence[SessionRow],
    *,
    title: str,
    now: datetime,
    first_number: int = 1,
    more_value: str | None = None,
) -> Message:
    """One page of `ls` (answered only to the caller; `title` from `list_title`,
    already escaped): numbered rows packed a
    dozen to a section, each followed by their Subscribe / Stop buttons, and
    a More button when Together has another page. Up to LS_PAGE rows fit in
    Block Kit's 50 blocks; more are counted, never dropped silently."""
    shown = list(rows[:LS_PAGE])
    blocks: list[dict[str, Any]] = [header_block(title or "Training sessions")]
    if not shown:
        blocks.append(section_block("No training sessions match."))
    for start in range(0, len(shown), _LS_CHUNK):
        chunk = shown[start : start + _LS_CHUNK]
        numbers = range(first_number + start, first_number + start + len(chunk))
        room = (MAX_SECTION_TEXT - len(chunk)) // len(chunk)
        lines = [
            truncate(_row_line(n, row, now), room) for n, row in zip(numbers, chunk, strict=True)
        ]
        blocks.append(section_block("\n".join(lines)))
        elements = [b for n, row in zip(numbers, chunk, strict=True) for b in _row_buttons(n, row)]
        if elements:
            blocks.append({"type": "actions", "elements": elements[:25]})
    hidden = len(rows) - len(shown)
    if hidden > 0:
        blocks.append(context_block(f"…and {hidden} more not shown"))
    if more_value is not None and len(more_value) <= MAX_BUTTON_VALUE:
        blocks.append({"type": "actions", "elements": [button("More", LS_MORE, value=more_value)]})
    count = len(shown)
    last = first_number + count - 1
    span = f"{first_number}–{last}" if count else "none"
    fallback = f"{title or 'Training sessions'}: sessions {span}"
    fallback += ", more on the next page." if more_value is not None else "."
    return message_of(fallback, blocks[:MAX_BLOCKS])


def list_title(status_filter: str, who: str | None, model: str | None) -> str:
    """`Running sessions · mine · model Qwen/Qwen3.5-4B` (the model escaped)."""
    words = {
        "running": "Running sessions",
        "creating": "Creating sessions",
        "error": "Sessions in error",
        "all": "All sessions",
    }
    parts = [words.get(status_filter, "Sessions")]
    if who:
        parts.append(inert(who, 60))
    if model:
        parts.append("model " + inert(model, 60))
    return truncate(" · ".join(parts), MAX_BUTTON_TEXT * 2)
