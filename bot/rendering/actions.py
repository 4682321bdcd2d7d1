"""The buttons that act from an alert or a card (Acknowledge, Keep alive 1 h,
Download) and what their clicks leave: the clicked message with a note of who
acted, and the answers only the clicker sees. Pure: no I/O.

A button's value names only what it acts on (an alert's outbox row, a model
resource, a session and checkpoint) and is checked again when clicked. Notes
go in a context block of their own (`block_id`), so a second note replaces the
first instead of piling up.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from bot.rendering.blocks import (
    MAX_ACTION_ELEMENTS,
    MAX_BLOCKS,
    MAX_SECTION_TEXT,
    Message,
    button,
    context_block,
    message_of,
    mrkdwn,
    plain_text,
    section_block,
)
from bot.rendering.text import (
    ID_LIMIT,
    NAME_LIMIT,
    code_span,
    inert,
    safe_link,
    safe_mention,
    user_ref,
)
from bot.rendering.words import duration_words, resource_status_words, slack_date
from bot.training.resources import ModelResource
from bot.training.sessions import is_session_id

ACKNOWLEDGE = "rl_ack"
KEEP_ALIVE = "rl_keep_alive"
DOWNLOAD = "rl_download"
#: every Download button's action id (`rl_download:<n>`: unique within a message)
DOWNLOAD_ACTION = re.compile(r"^rl_download(:\d{1,2})?$")
KEEP_ALIVE_SECONDS = 3600
ACK_NOTE = "rl_ack_note"
KEEP_ALIVE_NOTE = "rl_keep_alive_note"
#: Download buttons a message carries at most (the newest inference checkpoints)
MAX_DOWNLOADS = 3
#: a presigned URL longer than this cannot be a link in one section
_MAX_DOWNLOAD_URL = 2800
_MAX_FILES = 20


# --- buttons ---------------------------------------------------------------------------------


def ack_button(alert_id: int) -> dict[str, Any]:
    """Acknowledge: names the alert's outbox row."""
    return button("Acknowledge", ACKNOWLEDGE, value=str(alert_id), style="primary")


def read_alert_id(value: str) -> int | None:
    """An Acknowledge value back as the alert's row id; None for anything else."""
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        return None
    return int(value)


def keep_alive_button(resource_id: str) -> dict[str, Any]:
    """Keep alive 1 h, behind a confirmation like Stop (and the same allowlist)."""
    keep = button("Keep alive 1 h", KEEP_ALIVE, value=resource_id)
    keep["confirm"] = {
        "title": plain_text("Keep this resource up an hour?"),
        "text": mrkdwn(
            f"This asks Together to keep model resource {code_span(resource_id, 150)} from "
            "stopping for inactivity for the next hour. It keeps billing meanwhile."
        ),
        "confirm": plain_text("Keep it up"),
        "deny": plain_text("Cancel"),
    }
    return keep


def download_value(session_id: str, checkpoint_id: str) -> str | None:
    """`<session>/<checkpoint>` (neither id can hold a `/`); None for an id that
    would not come back as one."""
    if not (is_session_id(session_id) and is_session_id(checkpoint_id)):
        return None
    return f"{session_id}/{checkpoint_id}"


def read_download_value(value: str) -> tuple[str, str] | None:
    """A Download value back as (session id, checkpoint id); None for anything else."""
    session_id, _, checkpoint_id = value.partition("/")
    if not (is_session_id(session_id) and is_session_id(checkpoint_id)):
        return None
    return session_id, checkpoint_id


class Downloadable(NamedTuple):
    """An inference checkpoint a Download button is for."""

    checkpoint_id: str
    step: object


def download_buttons(session_id: str, checkpoints: Sequence[Downloadable]) -> list[dict[str, Any]]:
    """One Download button per checkpoint (the first MAX_DOWNLOADS), each with
    its own action id."""
    out: list[dict[str, Any]] = []
    for cp in checkpoints:
        value = download_value(session_id, cp.checkpoint_id)
        if value is None:
            continue
        step = inert(cp.step, 20, default="")
        label = f"Download step {step}" if step else "Download checkpoint"
        out.append(button(label[:75], f"{DOWNLOAD}:{len(out)}", value=value))
        if len(out) == MAX_DOWNLOADS:
            break
    return out


def with_actions(message: Message, elements: Sequence[dict[str, Any]]) -> Message:
    """The message with these buttons: in its last actions block when they fit
    there, else in a new one at the end (within Block Kit's limits)."""
    if not elements:
        return message
    blocks = [dict(b) for b in message["blocks"]]
    last = next((b for b in reversed(blocks) if b.get("type") == "actions"), None)
    if last is not None and len(last["elements"]) + len(elements) <= MAX_ACTION_ELEMENTS:
        last["elements"] = [*last["elements"], *elements]
    elif len(blocks) < MAX_BLOCKS:
        blocks.append({"type": "actions", "elements": list(elements)[:MAX_ACTION_ELEMENTS]})
    return {**message, "blocks": blocks}


# --- notes on the clicked message ----------------------------------------------------------------


def clock_time(at: datetime) -> str:
    """`10:42` in each reader's own time zone (`<!date>`), UTC in the fallback."""
    aware = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    utc = aware.astimezone(UTC)
    return f"<!date^{int(utc.timestamp())}^{{time}}|{utc:%H:%M} UTC>"


def acknowledged_words(user_id: str, at: datetime) -> str:
    return f":eyes: {user_ref(user_id)} is on it since {clock_time(at)}"


def with_note(message: Message, block_id: str, text: str) -> Message:
    """The message with a note in its own context block: replaced if there,
    else added at the end (an old block dropped to stay within the limit)."""
    note = {**context_block(text), "block_id": block_id}
    blocks = [b for b in message.get("blocks") or [] if isinstance(b, dict)]
    at = next((i for i, b in enumerate(blocks) if b.get("block_id") == block_id), None)
    if at is not None:
        blocks[at] = note
    else:
        blocks = [*blocks[: MAX_BLOCKS - 1], note]
    text_fallback = str(message.get("text") or "") or "rl-bot"
    return {"text": text_fallback, "blocks": blocks}


def acknowledged(message: Message, user_id: str, at: datetime) -> Message:
    """The alert as it was clicked, saying who took it and since when."""
    return with_note(message, ACK_NOTE, acknowledged_words(user_id, at))


def ack_taken_words(user_id: str, at: datetime, *, yours: bool) -> str:
    """The answer to a click on an alert someone already took."""
    if yours:
        return f"You took this alert at {clock_time(at)}."
    return f"{user_ref(user_id)} has this alert: on it since {clock_time(at)}."


def kept_alive(message: Message, user_id: str, resource: ModelResource) -> Message:
    """The alert as it was clicked, saying who kept the resource up and until when."""
    until = slack_date(resource.expires_at) if resource.expires_at is not None else None
    text = (
        f":hourglass_flowing_sand: {user_ref(user_id)} kept model resource "
        f"{code_span(resource.id, ID_LIMIT)} alive: "
        + (
            f"it now stops if inactive at {until}."
            if until
            else f"Together says it is {resource_status_words(resource)} and gave no new expiry."
        )
    )
    return with_note(message, KEEP_ALIVE_NOTE, text)


# --- answers to the clicker ----------------------------------------------------------------------


class FileLink(NamedTuple):
    """One file of a checkpoint download, as Together listed it."""

    filename: str
    size: object
    url: str


def size_words(size: object) -> str:
    """`1.5 GB`, `320 KB`, `12 B`; Together's own text when it is not a number."""
    try:
        value = float(size) if isinstance(size, int | float | str) else float("nan")
    except ValueError:
        value = float("nan")
    if value != value or value < 0 or value > 1e18:
        return inert(size, 30, default="size unknown")
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


def download_answer(checkpoint_id: str, variant: str, files: Sequence[FileLink]) -> Message:
    """Only the clicker sees this: each file's name, size and link. The links are
    presigned and expire; they are never posted where others see them."""
    what = "LoRA adapter" if variant.endswith("ADAPTER") else "merged model"
    head = (
        f":package: *Checkpoint {code_span(checkpoint_id, ID_LIMIT)}* ({what}): "
        f"{len(files)} file{'s' if len(files) != 1 else ''}. The links expire; ask again for fresh ones."
    )
    blocks: list[dict[str, Any]] = [section_block(head)]
    for f in files[:_MAX_FILES]:
        name = inert(f.filename, NAME_LIMIT, default="(no name)")
        link = safe_link(f.url, name.replace(">", "").replace("|", ""), limit=_MAX_DOWNLOAD_URL)
        line = f"• {link or name + ' (no usable link)'} · {size_words(f.size)}"
        blocks.append(section_block(line[:MAX_SECTION_TEXT]))
    if len(files) > _MAX_FILES:
        blocks.append(context_block(f"…and {len(files) - _MAX_FILES} more files"))
    if not files:
        blocks.append(context_block("Together listed no files for this checkpoint."))
    return message_of(f"Checkpoint {inert(checkpoint_id, ID_LIMIT)}: {len(files)} files.", blocks)


NOT_DOWNLOADABLE = (
    "That is a training checkpoint (state to resume training from): Together lets only "
    "inference checkpoints be downloaded."
)


# --- paging --------------------------------------------------------------------------------------


def repage_message(minutes: float, what: str, *, mention: str | None) -> Message:
    """An on-call alert nobody acknowledged, paged once more (in its thread,
    also shown in the channel)."""
    prefix = safe_mention(mention)
    lead = f"{prefix} " if prefix else ""
    about = inert(what, 300, default="an on-call alert")
    after = duration_words(timedelta(minutes=max(minutes, 0.0)))
    text = (
        f"{lead}:rotating_light: *Still nobody on this after {after}:* {about}. "
        "Press Acknowledge on the alert when you take it."
    )
    return message_of(f"{lead}Unacknowledged for {after}: {about}", [section_block(text)])


def creator_dm(message: Message, *, permalink: str | None) -> Message:
    """A thread's news as the session's creator is DMed it (`dm=creator`)."""
    link = safe_link(permalink, "the thread")
    where = f" It is also told in {link}." if link else ""
    head = context_block(f":wave: About one of your training sessions.{where}")
    return {**message, "blocks": [head, *message["blocks"]][:MAX_BLOCKS]}
