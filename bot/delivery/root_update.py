"""Redrawing a subscription's root card after one of its rows."""

from __future__ import annotations

import logging

from bot import rendering
from bot.outbox.contract.payloads import (
    CardPayload,
    CheckpointsPayload,
    Payload,
    ProgressPayload,
    RootPayload,
    TransitionPayload,
)
from bot.outbox.table import OutboxMessage
from bot.rendering import root_card
from bot.rendering import watch as rendering_watch
from bot.rendering.chart_block import has_chart, without_charts
from bot.rendering.root_card import CardExtras
from bot.slack_web import RefusalKind, SlackApiError, SlackWeb, error_of, refusal_of
from bot.store.tables import utcnow
from bot.training.snapshots import SessionSnapshot

log = logging.getLogger(__name__)


#: Slack's answer to a message whose blocks it does not take
INVALID_BLOCKS = "invalid_blocks"


async def update_root(
    row: OutboxMessage,
    payload: Payload,
    *,
    slack: SlackWeb,
    extras: CardExtras | None = None,
    from_store: bool = False,
) -> bool:
    """Keep the subscription's root message showing the current card: the
    session as the row saw it, and what the watches know (`extras`, read when the
    row was claimed): resource and spend, steps/min, target and ETA, a stall,
    the live chart. Every kind of redraw renders it the same way, so none drops
    a line. `from_store`: draw the session as stored at the claim instead (a
    card's redraw row, or a row whose post went out and whose card is owed), so a
    redraw sent after newer rows never draws an older state.

    True when Slack refused the chart block and took the card without it (the
    caller remembers that for the workspace)."""
    if not isinstance(payload, _Redrawing) or not row.thread_ts:
        return False
    session, ended = _drawn(payload, extras, from_store=from_store)
    if session is None:
        return False
    try:
        card = rendering.card(session, subscribed=not ended)
        if not ended:
            card = _with_extras(card, payload, extras)
    except Exception:
        # A card that cannot be drawn now cannot be drawn on a retry either: this
        # redraw is given up (the next one draws afresh), and the row, with every
        # row of its channel behind it, goes on.
        log.exception(
            "could not draw a root card; this redraw is given up",
            extra={"outbox_id": row.id, "channel_id": row.channel_id},
        )
        return False
    try:
        return await _update_falling_back(slack, row, row.thread_ts, card)
    except SlackApiError as exc:
        refusal = refusal_of(exc)
        if refusal.passing or refusal.kind is RefusalKind.AUTH:
            # A rate limit (chat.update has its own, lower one), Slack's own failure
            # however told (a 5xx, or HTTP 200 with `internal_error`), or a refused
            # token: the redraw alone is retried (the row's post is already stored,
            # see `bot.delivery.record`).
            raise
        # An uneditable root (deleted, too old) is logged, not retried.
        log.warning(
            "could not update root message: %s",
            error_of(exc),
            extra={"outbox_id": row.id, "channel_id": row.channel_id},
        )
        return False


_Redrawing = TransitionPayload | RootPayload | CardPayload | CheckpointsPayload | ProgressPayload


def _drawn(
    payload: _Redrawing, extras: CardExtras | None, *, from_store: bool
) -> tuple[SessionSnapshot | None, bool]:
    """The session a redraw draws, and whether the card is drawn as ended."""
    if from_store and extras is not None and extras.stored is not None:
        return extras.stored, not extras.active
    ended = isinstance(payload, TransitionPayload | RootPayload) and payload.ended
    return payload.session, ended


async def _update_falling_back(
    slack: SlackWeb, row: OutboxMessage, ts: str, card: rendering.Message
) -> bool:
    """chat.update with the card; a card whose chart Slack refuses (an older
    workspace) is sent again without it. True when that happened."""
    try:
        await _update(slack, row.channel_id, ts, card)
        return False
    except SlackApiError as exc:
        if error_of(exc) != INVALID_BLOCKS or not has_chart(card["blocks"]):
            raise
        log.info(
            "Slack refused the card's chart; sending the card without it",
            extra={"outbox_id": row.id, "channel_id": row.channel_id},
        )
    await _update(slack, row.channel_id, ts, without_charts(card))
    return True


async def _update(slack: SlackWeb, channel: str, ts: str, card: rendering.Message) -> None:
    await slack.update(channel=channel, ts=ts, text=card["text"], blocks=card["blocks"])


def _with_extras(
    card: rendering.Message, payload: _Redrawing, extras: CardExtras | None
) -> rendering.Message:
    """The card with its watch section; without a stored watch state (a row
    whose subscription or session row is gone), what the row itself carries."""
    if (
        extras is None
        and isinstance(payload, RootPayload | CardPayload)
        and payload.watch is not None
    ):
        extras = CardExtras(progress=payload.watch)
    if extras is not None:
        return root_card.card_with_extras(card, extras, now=utcnow())
    if isinstance(payload, ProgressPayload):  # the card shows a stall until it ends
        stalled = payload.event == "stalled"
        facts = rendering_watch.WatchFacts(
            rate=payload.rate, stalled_since=payload.since if stalled else None
        )
        return rendering_watch.with_watch(card, facts, step=payload.step)
    return card
