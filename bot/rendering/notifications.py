"""What the bot tells a channel unasked: status changes and checkpoints in a
session's thread, alerts for on-call and operators, and the daily digest."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from bot.rendering.actions import Downloadable, download_buttons
from bot.rendering.blocks import (
    MAX_HEADER_TEXT,
    Message,
    context_block,
    fields_block,
    header_block,
    message_of,
    section_block,
)
from bot.rendering.card import checkpoint_facts, error_text
from bot.rendering.text import (
    ERROR_MESSAGE_LIMIT,
    ID_LIMIT,
    NAME_LIMIT,
    NONE,
    VALUE_LIMIT,
    code_span,
    escape,
    inert,
    safe_link,
    safe_mention,
    sentence,
)
from bot.rendering.words import (
    error_code_words,
    session_label,
    session_name,
    short_error_code,
    slack_date,
    status_emoji,
    status_words,
)
from bot.training.sessions import TrainingSession
from bot.training.status import Status, short_status, status_of
from bot.training.transitions import CheckpointNews


class SessionLine(NamedTuple):
    """A watched session as one line (the digest; Home's "sessions you created")."""

    session_id: str
    display_name: str | None
    status: str


class StatusChange(NamedTuple):
    """One status change of the day, for the digest."""

    name: str  # the session's display name, else its id
    old_status: str
    new_status: str


_ENDED = "This session has finished, so this subscription has ended; no further updates."
_GONE = (
    "This session no longer exists on Together, so this subscription has ended; no further updates."
)


def transition_message(
    session: TrainingSession,
    old_status: str,
    new_status: str,
    *,
    ended: bool,
    gone: bool = False,
) -> Message:
    """One thread reply per status change; the end of the subscription is said
    in the same message so a thread never has a dangling closing line."""
    name = session_name(session)
    old_words, new_words = status_words(old_status), status_words(new_status)
    change = f"{status_emoji(old_status)} {old_words} → {status_emoji(new_status)} {new_words}"
    blocks: list[dict[str, Any]] = []
    fallback = [f"{name}:"]
    if not gone or short_status(old_status) != short_status(new_status):
        blocks.append(section_block(f"*Status changed:* {change}"))
        fallback.append(f"Status changed: {old_words} → {new_words}.")
    if status_of(new_status) is Status.ERROR:
        blocks.append(section_block(error_text(session)))
        error = session.error
        if error is not None and (error.code or error.message):
            phrase = error_code_words(error.code)[0] if error.code else None
            detail = ": ".join(inert(v, 300) for v in (phrase, error.message) if v)
            fallback.append(sentence(f"Error: {detail}"))
    if gone:
        blocks.append(section_block(f":wastebasket: {_GONE}"))
        fallback.append(_GONE)
    elif ended:
        blocks.append(section_block(f":checkered_flag: {_ENDED}"))
        fallback.append(_ENDED)
    return message_of(" ".join(fallback), blocks)


_LIST_CHECKPOINTS = 10


def checkpoint_message(
    session: TrainingSession, items: Sequence[CheckpointNews], *, more: int = 0
) -> Message:
    """All checkpoints that appeared in one poll, told as one message: each item
    new, or "registered" (a registration appeared later); `more` new
    checkpoints beyond the items are only counted."""
    name = session_name(session)
    lines = []
    for item in items[:_LIST_CHECKPOINTS]:
        facts = checkpoint_facts(item.kind, item.id, item.step, item.registered)
        lines.append(f"• *{item.kind.capitalize()} checkpoint {item.event}:* {facts}")
    more = max(more, 0)
    hidden = len(items) - len(lines) + more
    if hidden > 0:
        lines.append(f"…and {hidden} more")
    count = len(items) + more
    head = f":floppy_disk: {count} new checkpoint event{'s' if count != 1 else ''}"
    blocks = [section_block(head + "\n" + "\n".join(lines))]
    if session.step is not None:
        blocks.append(context_block(f"Latest step {inert(session.step, 40)}"))
    downloads = download_buttons(
        session.id,
        [
            Downloadable(item.id, item.step)
            for item in items[:_LIST_CHECKPOINTS]
            if item.kind != "training" and item.event != "registered"
        ],
    )
    if downloads:
        blocks.append({"type": "actions", "elements": downloads})
    return message_of(f"{name}: {count} checkpoint event{'s' if count != 1 else ''}.", blocks)


def oncall_alert(
    session: TrainingSession, *, permalink: str | None, mention: str | None
) -> Message:
    """Alert for a session that entered ERROR, with enough to triage it here."""
    prefix = safe_mention(mention)
    lead = f"{prefix} " if prefix else ""
    name = session_name(session)
    error = session.error
    code = error.code if error is not None else None
    message = error.message if error is not None else None
    occurred = error.occurred_at if error is not None else None
    phrase, next_step = error_code_words(code) if code else (None, None)

    blocks: list[dict[str, Any]] = [
        section_block(f"{lead}:rotating_light: *Training session entered Error:* {name}"),
        fields_block(
            [
                ("Session ID", code_span(session.id, ID_LIMIT)),
                ("Error", f"{phrase} {short_error_code(code)}" if code else NONE),
                ("Base model", inert(session.base_model, VALUE_LIMIT)),
                ("Created by", inert(session.created_by, VALUE_LIMIT)),
                ("Occurred", slack_date(occurred)),
            ]
        ),
        section_block(
            "*Error message*\n"
            + inert(message, ERROR_MESSAGE_LIMIT, multiline=True, default="(none given)")
            + (f"\n*Next step:* {next_step}" if next_step else "")
        ),
    ]
    link = safe_link(permalink, "View thread")
    if link is not None:
        blocks.append(section_block(link))

    summary = f"{lead}Training session {session_label(session)} entered Error"
    if code or message:
        summary += ": " + ": ".join(inert(v, 300) for v in (phrase, message) if v)
    return message_of(summary, blocks)


def operator_alert(title: str, detail: str, *, mention: str | None) -> Message:
    """Incidents for whoever runs the bot (key rejected, Together unreachable,
    recovered); `detail` may quote Together's response, so it is escaped."""
    prefix = safe_mention(mention)
    lead = f"{prefix} " if prefix else ""
    heading = inert(title, MAX_HEADER_TEXT, default="rl-bot")
    body = inert(detail, ERROR_MESSAGE_LIMIT, multiline=True, default="")
    section = f"{lead}{body}".strip() or "(no details)"
    return message_of(
        f"{lead}{heading}: {body or '(no details)'}",
        [header_block(heading), section_block(section)],
    )


def session_lines(rows: Sequence[SessionLine], most: int) -> str:
    """One line per session, at most `most`, then a count of the rest."""
    lines = [
        f"{status_emoji(row.status)} "
        f"{inert(row.display_name, NAME_LIMIT, default='') or code_span(row.session_id, ID_LIMIT)}"
        f" · {status_words(row.status)}"
        for row in rows[:most]
    ]
    if len(rows) > most:
        lines.append(f"…and {len(rows) - most} more")
    return "\n".join(lines)


def digest_message(
    day: str, sessions: Sequence[SessionLine], transitions: Sequence[StatusChange]
) -> Message:
    """The daily digest: each watched session's state, then the day's changes."""
    blocks: list[dict[str, Any]] = [header_block(f"Training sessions: daily digest, {escape(day)}")]
    if sessions:
        blocks.append(section_block("*Watched here*\n" + session_lines(sessions, 40)))
    else:
        blocks.append(section_block("No sessions are watched in this channel."))
    if transitions:
        lines = [
            f"• {inert(change.name, NAME_LIMIT)}: "
            f"{status_words(change.old_status)} → {status_words(change.new_status)}"
            for change in transitions[:40]
        ]
        if len(transitions) > 40:
            lines.append(f"…and {len(transitions) - 40} more")
        blocks.append(section_block("*Changes in the last 24 hours*\n" + "\n".join(lines)))
    else:
        blocks.append(context_block("No status changes in the last 24 hours."))
    count = len(sessions)
    return message_of(
        f"Daily digest {day}: {count} watched session{'s' if count != 1 else ''}, "
        f"{len(transitions)} change{'s' if len(transitions) != 1 else ''}.",
        blocks,
    )
