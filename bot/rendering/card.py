"""The session card: posted once, then edited in place as the session changes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from bot.rendering.actions import Downloadable, download_buttons
from bot.rendering.blocks import (
    CHART,
    REFRESH,
    STOP,
    SUBSCRIBE,
    UNSUBSCRIBE,
    WANDB,
    Message,
    button,
    context_block,
    fields_block,
    header_block,
    message_of,
    mrkdwn,
    plain_text,
    section_block,
)
from bot.rendering.text import ERROR_MESSAGE_LIMIT, ID_LIMIT, VALUE_LIMIT, code_span, inert
from bot.rendering.words import (
    error_code_words,
    registration_words,
    session_label,
    session_name,
    session_type_words,
    short_error_code,
    slack_date,
    status_emoji,
    status_words,
    timestamp,
)
from bot.training.checkpoints import Checkpoint, TrainingCheckpoint
from bot.training.sessions import TrainingSession, is_session_id
from bot.training.snapshots import checkpoint_count
from bot.training.status import Status

STOPPABLE = frozenset({Status.RUNNING, Status.CREATING})
_LATEST_CHECKPOINTS = 3


def _checkpoint_key(cp: Checkpoint) -> tuple[bool, float]:
    ts = timestamp(cp.created_at)
    return (ts is not None, ts if ts is not None else 0.0)


def checkpoint_facts(
    kind: str,
    checkpoint_id: str,
    step: object,
    registered: Sequence[str],
    *,
    when: str | None = None,
) -> str:
    """One checkpoint, the same words on the card and in its news: id, (when,)
    step and what its registration is for."""
    parts = [code_span(checkpoint_id, ID_LIMIT) if checkpoint_id else "(no id)"]
    if when is not None:
        parts.append(when)
    if step is not None:
        parts.append(f"step {inert(step, 40)}")
    registration = registration_words(kind, registered)
    if registration:
        parts.append(registration)
    return " · ".join(parts)


def _checkpoint_line(cp: Checkpoint) -> str:
    kind = "training" if isinstance(cp, TrainingCheckpoint) else "inference"
    facts = checkpoint_facts(
        kind, cp.id, cp.step, cp.registered_names(), when=slack_date(cp.created_at)
    )
    return "• " + facts


_CHECKPOINT_KINDS = {
    "training": "training state to resume from",
    "inference": "weights to deploy",
}


def _checkpoint_section(kind: str, checkpoints: Sequence[Checkpoint], total: int) -> dict[str, Any]:
    """The newest few checkpoints of one kind; the rest (of `total`) are only counted."""
    newest = sorted(checkpoints, key=_checkpoint_key, reverse=True)[:_LATEST_CHECKPOINTS]
    title = f"*Latest {kind} checkpoints* ({_CHECKPOINT_KINDS.get(kind, kind)})"
    lines = [title] + [_checkpoint_line(cp) for cp in newest]
    more = total - len(newest)
    if more > 0:
        lines.append(f"…and {more} more {kind} checkpoint{'s' if more != 1 else ''}")
    # Each line is bounded well under a third of the limit, so the "and N more"
    # line always survives the final cut.
    return section_block("\n".join(lines))


def error_text(session: TrainingSession) -> str:
    """The error's phrase, code, message and next step (the card and its thread share it)."""
    error = session.error
    if error is None or not (error.code or error.message):
        return "*Error:* Together gave no error details."
    lines = ["*Error*"]
    next_step = None
    if error.code:
        phrase, next_step = error_code_words(error.code)
        lines = [f"*Error: {phrase}* {short_error_code(error.code)}"]
    if error.message:
        lines.append(inert(error.message, ERROR_MESSAGE_LIMIT, multiline=True))
    if next_step:
        lines.append(f"*Next step:* {next_step}")
    if error.occurred_at is not None:
        lines.append(f"Occurred {slack_date(error.occurred_at)}")
    return "\n".join(lines)


def _lora_text(session: TrainingSession) -> str | None:
    lora = session.lora_config
    if lora is None:
        return None
    parts = [
        f"{label} {inert(value, 40)}"
        for label, value in (
            ("rank", lora.rank),
            ("alpha", lora.alpha),
            ("dropout", lora.dropout),
            ("seed", lora.seed),
        )
        if value is not None
    ]
    if lora.train_unembed is not None:
        parts.append(f"train unembed {'yes' if lora.train_unembed else 'no'}")
    return "*LoRA:* " + (" · ".join(parts) if parts else "default settings")


def _policy_text(session: TrainingSession) -> str | None:
    """The trainer's policy version against the one the generator applied, on one line."""
    policy = session.policy_state
    if policy is None:
        return None
    parts = []
    if policy.trainer_step is not None:
        parts.append(f"trainer step {inert(policy.trainer_step, 40)}")
    if policy.applied_weights_version is not None:
        applied = f"applied weights version {inert(policy.applied_weights_version, 40)}"
        target = policy.target_weights_version
        if target is not None and target != policy.applied_weights_version:
            applied += f" (target {inert(target, 40)})"
        parts.append(applied)
    if policy.pending_publish:
        parts.append("pending publish")
    return "*Policy state:* " + " · ".join(parts) if parts else None


def stop_button(session: TrainingSession) -> dict[str, Any]:
    """Stop asks first: Slack shows the confirm dialog before the click reaches us."""
    stop = button("Stop session", STOP, value=session.id, style="danger")
    stop["confirm"] = {
        "title": plain_text("Stop this training session?"),
        "text": mrkdwn(
            f"This asks Together to stop {inert(session.name, 150)}. "
            "Training ends; checkpoints already saved are kept."
        ),
        "confirm": plain_text("Stop it"),
        "deny": plain_text("Keep running"),
        "style": "danger",
    }
    return stop


def card(
    session: TrainingSession, *, subscribed: bool = False, now: datetime | None = None
) -> Message:
    """The session card, posted once and then edited in place.

    `now` (when the bot fetched the session) is optional: without it the card
    depends only on the session, so an unchanged session renders identically
    and the caller can skip a pointless chat.update.
    """
    raw = session.status
    name = session_name(session)
    session_id = code_span(session.id, ID_LIMIT)
    status = f"{status_emoji(raw)} {status_words(raw)}"

    blocks: list[dict[str, Any]] = [
        header_block(f"{status_emoji(raw)} {name}"),
    ]
    pairs = [
        ("Status", status),
        ("ID", session_id),
        ("Base model", inert(session.base_model, VALUE_LIMIT)),
        ("Model resource", code_span(session.model_resources_id, ID_LIMIT)),
        ("Created by", inert(session.created_by, VALUE_LIMIT)),
        ("Created", slack_date(session.created_at)),
        ("Updated", slack_date(session.updated_at)),
    ]
    if session.step is not None:
        pairs.append(("Step", inert(session.step, 40)))
    session_type = session_type_words(session.type)
    if session_type:
        pairs.append(("Type", session_type))
    blocks.append(fields_block(pairs))

    details = []
    lora = _lora_text(session)
    if lora:
        details.append(lora)
    if session.resume_from_checkpoint_id:
        details.append(
            f"*Resumed from checkpoint:* {code_span(session.resume_from_checkpoint_id, ID_LIMIT)}"
        )
    policy = _policy_text(session)
    if policy:
        details.append(policy)
    if details:
        blocks.append(section_block("\n".join(details)))

    if session.error is not None and (session.error.code or session.error.message):
        blocks.append(section_block(f"{status_emoji(Status.ERROR.value)} {error_text(session)}"))

    training, inference = session.training_checkpoints, session.inference_checkpoints
    # A stored snapshot keeps only the newest checkpoints, and their counts.
    n_training = checkpoint_count(session, "training")
    n_inference = checkpoint_count(session, "inference")
    blocks.append(section_block(f"*Checkpoints:* training {n_training} · inference {n_inference}"))
    if training:
        blocks.append(_checkpoint_section("training", training, n_training))
    if inference:
        blocks.append(_checkpoint_section("inference", inference, n_inference))

    buttons: list[dict[str, Any]] = []
    # A button's value must round-trip to a session id the handlers accept.
    if is_session_id(session.id):
        if subscribed:
            buttons.append(button("Unsubscribe", UNSUBSCRIBE, value=session.id))
        else:
            buttons.append(button("Subscribe", SUBSCRIBE, value=session.id, style="primary"))
        buttons.append(button("Refresh", REFRESH, value=session.id))
        buttons.append(button("Chart", CHART, value=session.id))
        if session.status_enum in STOPPABLE:
            buttons.append(stop_button(session))
    wandb_url = session.wandb_url
    if wandb_url is not None:
        buttons.append(button("W&B run", WANDB, url=wandb_url))
    # Only the person who clicks gets the files (see `bot.commands.download`).
    newest = sorted(inference, key=_checkpoint_key, reverse=True)
    buttons += download_buttons(session.id, [Downloadable(cp.id, cp.step) for cp in newest])
    if buttons:
        blocks.append({"type": "actions", "elements": buttons})

    updated = now if now is not None else session.updated_at
    blocks.append(context_block(f"Last updated {slack_date(updated)}"))

    return message_of(f"{status_words(raw)} · {session_label(session)}", blocks)
