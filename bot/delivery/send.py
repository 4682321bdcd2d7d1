"""Sending one row to Slack, in two steps that are retried apart: the post
(after the duplicate check) and the root card's redraw.

The post is stored the moment Slack takes it (`record.record_posted`), so a
refused redraw retries the redraw alone and never posts the message again.
"""

from __future__ import annotations

import logging

import aiohttp

from bot.delivery.deps import Posting
from bot.delivery.duplicates import METADATA_EVENT, already_posted
from bot.delivery.messages import render_row
from bot.delivery.outcome import SendResult, classify, retry_later
from bot.delivery.root_update import update_root
from bot.delivery.routing import default_mode, reply_broadcast
from bot.outbox.contract.payloads import CardPayload, RootPayload
from bot.outbox.contract.rows import State
from bot.outbox.table import OutboxMessage
from bot.rendering.root_card import CardExtras
from bot.slack_web import SlackApiError, SlackWeb

log = logging.getLogger(__name__)

# What Slack's client raises when Slack cannot be reached at all.
UNREACHABLE = (aiohttp.ClientError, TimeoutError, OSError)


def posts_message(row: OutboxMessage) -> bool:
    """Whether the row still owes a message: not a root-only row, and not posted yet
    (a pending row with a `sent_ts` owes only its root card)."""
    return row.sent_ts is None and not isinstance(row.typed_payload, RootPayload | CardPayload)


def draws_from_store(row: OutboxMessage) -> bool:
    """Whether the row's redraw draws the session as stored at the claim rather than
    as the row saw it: a card's redraw row, or a row that owes only its card on a
    later attempt (its post went out, or it is a card-only status change), which may
    be sent after newer rows (`bot.outbox.order`)."""
    payload = row.typed_payload
    if isinstance(payload, CardPayload):
        return True
    return row.attempts > 1 and (row.sent_ts is not None or isinstance(payload, RootPayload))


async def post_one(row: OutboxMessage, posting: Posting, *, mode: str | None = None) -> SendResult:
    """Post the row's message, unless Slack already has it from an earlier attempt.
    SENT (with the message's ts) means Slack has it; the root card is not touched.
    `mode` is the thread's `broadcast=` (None: BROADCAST_ERRORS decides)."""
    slack, settings = posting.slack, posting.settings
    extra = {"outbox_id": row.id, "channel_id": row.channel_id, "session_id": row.session_id}
    try:
        if row.attempts > 1 and (ts := await already_posted(slack, row)):
            log.info("outbox row already in Slack; not posting again", extra=extra)
            return SendResult(row.id, State.SENT, sent_ts=ts, duplicate=True)
        message = await render_row(row, posting)
        response = await slack.post(
            channel=row.channel_id,
            thread_ts=row.thread_ts,
            text=message["text"],
            blocks=message["blocks"],
            metadata={
                "event_type": METADATA_EVENT,
                "event_payload": {"dedupe_key": row.dedupe_key},
            },
            reply_broadcast=reply_broadcast(
                row.typed_payload,
                mode or default_mode(settings.broadcast_errors),
                in_thread=bool(row.thread_ts),
            ),
            unfurl_links=False,
            unfurl_media=False,
        )
        return SendResult(row.id, State.SENT, sent_ts=str(response.get("ts") or ""))
    except SlackApiError as exc:
        return classify(row, exc, extra)
    except UNREACHABLE as exc:
        log.warning("Slack unreachable; will retry", extra=extra | {"error": type(exc).__name__})
        return retry_later(row, None, type(exc).__name__)


async def redraw_root(
    row: OutboxMessage,
    *,
    slack: SlackWeb,
    extras: CardExtras | None = None,
    from_store: bool = False,
) -> SendResult:
    """Redraw the row's root card (with `extras`, what the watches saw). A rate limit,
    a server error or no answer at all leaves the row pending with its post
    (`row.sent_ts`) kept, so only the redraw is retried. `chart_refused`: Slack
    took the card only without its chart."""
    extra = {"outbox_id": row.id, "channel_id": row.channel_id, "session_id": row.session_id}
    sent_ts = row.sent_ts if row.sent_ts is not None else row.thread_ts
    try:
        refused = await update_root(
            row, row.typed_payload, slack=slack, extras=extras, from_store=from_store
        )
    except SlackApiError as exc:
        result = classify(row, exc, extra)
    except UNREACHABLE as exc:
        log.warning("Slack unreachable for a root card; will retry", extra=extra)
        result = retry_later(row, None, type(exc).__name__)
    else:
        return SendResult(row.id, State.SENT, sent_ts=sent_ts, chart_refused=refused)
    result.sent_ts = row.sent_ts
    return result
