"""Redrawing a subscription's root card after one of its rows."""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import rendering
from bot.outbox.contract.payloads import (
    CheckpointsPayload,
    Payload,
    ProgressPayload,
    RootPayload,
    TransitionPayload,
)
from bot.outbox.table import OutboxMessage
from bot.rendering import root_card
from bot.rendering import watch as rendering_watch
from bot.rendering.root_card import CardWatch
from bot.store.tables import utcnow

log = logging.getLogger(__name__)


async def update_root(
    row: OutboxMessage, payload: Payload, *, slack: AsyncWebClient, watch: CardWatch | None = None
) -> None:
    """Keep the subscription's root message showing the current card: the
    session as the row saw it, and what the watch knows (`watch`, read when the
    row was claimed): resource and spend, steps/min, target and ETA, a stall.
    Every kind of redraw renders it the same way, so none drops a line."""
    if not isinstance(
        payload, TransitionPayload | RootPayload | CheckpointsPayload | ProgressPayload
    ):
        return
    if not row.thread_ts or payload.session is None:
        return
    ended = isinstance(payload, TransitionPayload | RootPayload) and payload.ended
    card = rendering.card(payload.session, subscribed=not ended)
    if not ended:
        card = _with_watch(card, payload, watch)
    try:
        await slack.chat_update(
            channel=row.channel_id, ts=row.thread_ts, text=card["text"], blocks=card["blocks"]
        )
    except SlackApiError as exc:
        if (
            exc.response.status_code == 429
            or exc.response.status_code >= 500
            or (exc.response.get("error") == "ratelimited")
        ):
            # chat.update has its own, lower rate limit: the redraw alone is retried
            # (the row's post is already stored, see `bot.delivery.record`).
            raise
        # An uneditable root (deleted, too old) is logged, not retried.
        log.warning(
            "could not update root message: %s",
            exc.response.get("error"),
            extra={"outbox_id": row.id, "channel_id": row.channel_id},
        )


def _with_watch(
    card: rendering.Message,
    payload: TransitionPayload | RootPayload | CheckpointsPayload | ProgressPayload,
    watch: CardWatch | None,
) -> rendering.Message:
    """The card with its watch section; without a stored watch state (a row
    whose subscription or session row is gone), what the row itself carries."""
    if watch is None and isinstance(payload, RootPayload) and payload.watch is not None:
        watch = CardWatch(progress=payload.watch)
    if watch is not None:
        return root_card.card_with_watch(card, watch, now=utcnow())
    if isinstance(payload, ProgressPayload):  # the card shows a stall until it ends
        stalled = payload.event == "stalled"
        facts = rendering_watch.WatchFacts(
            rate=payload.rate, stalled_since=payload.since if stalled else None
        )
        return rendering_watch.with_watch(card, facts, step=payload.step)
    return card
