"""Slack messages for the stall and spend watch: pure, no I/O.

The card's resource-and-progress section, the stalled / resumed / slow-start
thread replies, and the idle-resource alert with its Stop resource button (the
`ls` page is in `ls_page`). Same rules as `bot.rendering`: every value from Together or a
user goes through its escaping (`inert`, `code_span`), text is `verbatim`, and
every message stays inside Block Kit's limits whatever the values.
Spend is always labelled an estimate: it is Together's hourly price times the
READY time the bot itself observed, not Together's bill.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.rendering.blocks import (
    MAX_BLOCKS,
    Message,
    button,
    context_block,
    fields_block,
    message_of,
    mrkdwn,
    plain_text,
    section_block,
)
from bot.rendering.text import (
    ID_LIMIT,
    VALUE_LIMIT,
    code_span,
    inert,
    safe_link,
    safe_mention,
    user_ref,
)
from bot.rendering.words import (
    duration_words,
    gpu_words,
    money_words,
    resource_status_words,
    session_label,
    session_name,
    slack_date,
    status_words,
    step_words,
)
from bot.training.resources import CostEstimate, ModelResource
from bot.training.rules import rate_words
from bot.training.sessions import TrainingSession, is_session_id
from bot.training.status import ResourceStatus
from bot.training.thresholds import BUDGET_CURRENCY, same_currency

STOP_RESOURCE = "rl_stop_resource"


# --- the card's resource and progress section ---------------------------------------------


@dataclass(frozen=True, kw_only=True)
class WatchFacts:
    """What the watch knows about one session, for its card. Keyword-only: its
    fields are many and of alike types, so a new one must not shift the others."""

    resource: ModelResource | None = None
    price: CostEstimate | None = None
    #: READY time of the resource the bot observed (seconds)
    ready_seconds: float | None = None
    rate: float | None = None
    target: int | None = None
    eta: datetime | None = None
    #: the channel's budget on the session: the spend shown "of" it
    budget: float | None = None
    #: set while the session is stalled: the frozen step was first seen then
    stalled_since: datetime | None = None
    #: set while the resource is READY with no active session attached
    idle_since: datetime | None = None


def watch_blocks(facts: WatchFacts, *, step: int | None = None) -> list[dict[str, Any]]:
    """The card's extra section: resource status, GPUs, queue, inactivity stop,
    price and estimated spend, steps/min and ETA, and the stalled / idle flags.
    At most three blocks; nothing when there is nothing to say."""
    blocks: list[dict[str, Any]] = []
    flags = []
    if facts.stalled_since is not None:
        flags.append(
            f":warning: *No progress* since {slack_date(facts.stalled_since)} "
            f"(step {step_words(step)}): the training client may have stopped."
        )
    if facts.idle_since is not None:
        flags.append(
            f":money_with_wings: *Resource idle* since {slack_date(facts.idle_since)}: "
            "ready and billing with no session running on it."
        )
    if flags:
        blocks.append(section_block("\n".join(flags)))

    pairs: list[tuple[str, str]] = []
    resource = facts.resource
    if resource is not None:
        pairs.append(("Resource", resource_status_words(resource)))
        pairs.append(("GPUs", gpu_words(resource)))
        queue = resource.queue_position
        if queue is not None and resource.status_enum is ResourceStatus.PENDING:
            pairs.append(("Queue position", inert(queue, 20)))
        if resource.expires_at is not None and resource.status_enum is ResourceStatus.READY:
            pairs.append(("Stops if inactive at", slack_date(resource.expires_at)))
    price = facts.price
    per_hour = money_words(price.price_per_hour, price.currency) if price is not None else None
    if per_hour is not None:
        pairs.append(("Price", f"{per_hour}/h"))
        spend = _spend(facts)
        if spend is not None:
            pairs.append(("Spend so far (estimate)", f"≈ {spend}{_of_budget(facts)}"))
    rate = rate_words(facts.rate)
    if rate is not None:
        pairs.append(("Progress", rate))
    if facts.target is not None:
        target = f"step {step_words(facts.target)}"
        if facts.eta is not None:
            target += f", ETA {slack_date(facts.eta)}"
        pairs.append(("Target", target))
    if pairs:
        blocks.append(fields_block(pairs))
    if per_hour is not None and _spend(facts) is not None:
        blocks.append(
            context_block(
                "Spend is an estimate: Together's hourly price times the time the bot "
                "saw the resource ready, not Together's bill."
            )
        )
    return blocks


def with_watch(card: Message, facts: WatchFacts, *, step: int | None = None) -> Message:
    """A card with its watch section placed before its buttons (or at the end),
    still within Block Kit's block limit."""
    extra = watch_blocks(facts, step=step)
    if not extra:
        return card
    blocks = list(card["blocks"])
    at = next((i for i, b in enumerate(blocks) if b.get("type") == "actions"), len(blocks))
    blocks[at:at] = extra
    if len(blocks) > MAX_BLOCKS:  # drop from the watch section, never the card's own
        del blocks[at + len(extra) - (len(blocks) - MAX_BLOCKS) : at + len(extra)]
    return {**card, "blocks": blocks}


def _of_budget(facts: WatchFacts) -> str:
    """` of $100 budget`; a spend priced in another currency is never compared
    with a budget, which is in dollars: the card says so."""
    budget = money_words(facts.budget, BUDGET_CURRENCY) if facts.budget else None
    if budget is None or facts.price is None:
        return ""
    if same_currency(facts.price.currency):
        return f" of {budget} budget"
    return f"; the {budget} budget is in dollars: not compared"


def _spend(facts: WatchFacts) -> str | None:
    price = facts.price
    if price is None or price.price_per_hour is None or facts.ready_seconds is None:
        return None
    amount = price.price_per_hour * max(facts.ready_seconds, 0.0) / 3600
    return money_words(amount, price.currency)


# --- thread replies ------------------------------------------------------------------------------


def stalled_message(
    session: TrainingSession,
    *,
    step: int | None,
    since: datetime,
    stalled_for: timedelta,
    idles_out_at: datetime | None,
    idles_out_estimated: bool = False,
    mention: str | None = None,
    permalink: str | None = None,
) -> Message:
    """ "No progress for 15 min: step 1,234 since 10:02 — the training client may
    have stopped; the resource idles out at 11:02" (Together's `expires_at`), or
    "at about 11:02 (estimated …)" when `idles_out_estimated`. With `mention`
    and `permalink` it is the on-call page for the same stall."""
    prefix = safe_mention(mention)
    lead = f"{prefix} " if prefix else ""
    name = session_name(session)
    head = (
        f"{lead}:warning: *No progress for {duration_words(stalled_for)}:* "
        f"step {step_words(step)} since {slack_date(since)} — the training client may have stopped"
    )
    if idles_out_at is not None and idles_out_estimated:
        head += (
            f"; the resource idles out at about {slack_date(idles_out_at)} (estimated: the "
            "last step change plus its inactive timeout)"
        )
    elif idles_out_at is not None:
        head += f"; the resource idles out at {slack_date(idles_out_at)}"
    head += "."
    blocks: list[dict[str, Any]] = [
        section_block(f"{head}\n*Session:* {name} {code_span(session.id, ID_LIMIT)}"),
        context_block(
            "Together keeps a session RUNNING when its client dies; its model resource "
            "bills until it idles out, then the session expires."
        ),
    ]
    link = safe_link(permalink, "View thread")
    if link is not None:
        blocks.append(section_block(link))
    fallback = (
        f"{lead}{session_label(session)}: no progress for {duration_words(stalled_for)} "
        f"(step {step_words(step)}); the training client may have stopped."
    )
    return message_of(fallback, blocks)


def resumed_message(
    session: TrainingSession,
    *,
    old_step: int | None,
    new_step: int | None,
    stalled_for: timedelta,
) -> Message:
    text = (
        f":arrow_forward: *Progress resumed:* step {step_words(old_step)} → "
        f"{step_words(new_step)} after {duration_words(stalled_for)} without progress."
    )
    fallback = f"{session_label(session)}: progress resumed at step {step_words(new_step)}."
    return message_of(fallback, [section_block(text)])


def creating_message(
    session: TrainingSession,
    *,
    waited: timedelta,
    resource: ModelResource | None,
) -> Message:
    """A session still CREATING after CREATING_ALERT_AFTER, with its resource's
    place in Together's GPU queue when Together gives one."""
    lines = [
        f":hourglass: *Still creating after {duration_words(waited)}.*",
    ]
    fallback = f"{session_label(session)}: still creating after {duration_words(waited)}"
    if resource is not None:
        lines.append(f"*Model resource:* {resource_status_words(resource)}")
        queue = resource.queue_position
        if queue is not None:
            lines.append(
                f"*Queue position:* {inert(queue, 20)} (older resources of the same GPU type "
                "waiting for GPUs, plus one)"
            )
            fallback += f", queue position {inert(queue, 20)}"
    lines.append("It is probably waiting for GPU capacity; nothing is billed until it is ready.")
    return message_of(fallback + ".", [section_block("\n".join(lines))])


# --- idle resources ----------------------------------------------------------------------------


def stop_resource_button(resource_id: str, *, label: str = "Stop resource") -> dict[str, Any]:
    """Behind a confirmation, like Stop session; the click is checked against
    the same allowlist before anything is sent."""
    stop = button(label, STOP_RESOURCE, value=resource_id, style="danger")
    stop["confirm"] = {
        "title": plain_text("Stop this model resource?"),
        "text": mrkdwn(
            f"This asks Together to stop model resource {code_span(resource_id, 150)} and "
            "release its GPUs; billing stops. Sessions still active on it must be "
            "stopped first."
        ),
        "confirm": plain_text("Stop it"),
        "deny": plain_text("Keep it"),
        "style": "danger",
    }
    return stop


def idle_resource_alert(
    resource: ModelResource,
    *,
    idle_since: datetime,
    now: datetime,
    sessions: Sequence[TrainingSession] = (),
    price: CostEstimate | None = None,
    mention: str | None = None,
) -> Message:
    """A READY resource with no CREATING or RUNNING session: it bills for
    nothing until it is stopped or idles out."""
    prefix = safe_mention(mention)
    lead = f"{prefix} " if prefix else ""
    idle_for = duration_words(now - idle_since)
    head = (
        f"{lead}:money_with_wings: *Model resource idle for {idle_for}:* "
        f"{code_span(resource.id, ID_LIMIT)} is ready, and billing, with no session running on it."
    )
    pairs = [
        ("Base model", inert(resource.base_model, VALUE_LIMIT)),
        ("GPUs", gpu_words(resource)),
        ("Created by", inert(resource.created_by, VALUE_LIMIT)),
        ("Idle since", slack_date(idle_since)),
    ]
    if resource.expires_at is not None:
        pairs.append(("Stops by itself at", slack_date(resource.expires_at)))
    per_hour = money_words(price.price_per_hour, price.currency) if price is not None else None
    if per_hour is not None:
        pairs.append(("Price", f"{per_hour}/h"))
    blocks: list[dict[str, Any]] = [section_block(head), fields_block(pairs)]
    if sessions:
        shown = [
            f"• {session_name(s)} {code_span(s.id, ID_LIMIT)} · {status_words(s.status)}"
            for s in sessions[:10]
        ]
        if len(sessions) > 10:
            shown.append(f"…and {len(sessions) - 10} more")
        blocks.append(section_block("*Sessions that used it*\n" + "\n".join(shown)))
    blocks.append(
        context_block(
            "A stopped session leaves its resource running. Stop the resource if nobody "
            "will start a session on it; otherwise it stops after its inactive timeout."
        )
    )
    # A button's value must round-trip to an id the handler accepts.
    if resource.status_enum is ResourceStatus.READY and is_session_id(resource.id):
        blocks.append({"type": "actions", "elements": [stop_resource_button(resource.id)]})
    fallback = f"{lead}Model resource {inert(resource.id, ID_LIMIT)} idle for {idle_for}"
    fallback += f" at {per_hour}/h." if per_hour else "."
    return message_of(fallback, blocks)


def resource_stop_requested_message(user_id: str, resource: ModelResource) -> Message:
    """Said in the thread: who stopped it, and what Together says now."""
    text = (
        f":octagonal_sign: {user_ref(user_id)} asked Together to stop model resource "
        f"{code_span(resource.id, ID_LIMIT)}. Together says it is now "
        f"{resource_status_words(resource)}."
    )
    return message_of(text, [section_block(text)])
