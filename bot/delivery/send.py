"""Posting one row to Slack: the duplicate check, the post, the root card."""

from __future__ import annotations

import logging

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Settings
from bot.delivery.duplicates import METADATA_EVENT, already_posted
from bot.delivery.messages import render_row
from bot.delivery.outcome import SendResult, classify, retry_later
from bot.delivery.root_update import update_root
from bot.faults import crash_point
from bot.outbox.contract.payloads import Payload, RootPayload, TransitionPayload
from bot.outbox.contract.rows import State
from bot.outbox.queue import OutboxMessage
from bot.root_card import CardWatch
from bot.together.client import TogetherClient
from bot.training.status import Status, status_of

log = logging.getLogger(__name__)


async def send_one(
    row: OutboxMessage,
    *,
    slack: AsyncWebClient,
    settings: Settings,
    together: TogetherClient | None = None,
    watch: CardWatch | None = None,
) -> SendResult:
    """Post one row (and redraw its root card with `watch`, the watch's state)."""
    extra = {"outbox_id": row.id, "channel_id": row.channel_id, "session_id": row.session_id}
    payload = row.typed_payload
    try:
        if isinstance(payload, RootPayload):  # a change this subscription does not want told
            await update_root(row, payload, slack=slack, watch=watch)
            return SendResult(row.id, State.SENT, sent_ts=row.thread_ts)
        if row.attempts > 1 and (ts := await already_posted(slack, row)):
            log.info("outbox row already in Slack; not posting again", extra=extra)
            await update_root(row, payload, slack=slack, watch=watch)
            return SendResult(row.id, State.SENT, sent_ts=ts, duplicate=True)
        message = await render_row(row, slack=slack, settings=settings, together=together)
        response = await slack.chat_postMessage(
            channel=row.channel_id,
            thread_ts=row.thread_ts,
            text=message["text"],
            blocks=message["blocks"],
            metadata={
                "event_type": METADATA_EVENT,
                "event_payload": {"dedupe_key": row.dedupe_key},
            },
            reply_broadcast=_broadcast(row, payload, settings),
            unfurl_links=False,
            unfurl_media=False,
        )
        crash_point("deliver_after_post", settings.fault_crash_at)
        await update_root(row, payload, slack=slack, watch=watch)
        crash_point("deliver_after_update", settings.fault_crash_at)
        return SendResult(row.id, State.SENT, sent_ts=str(response.get("ts") or ""))
    except SlackApiError as exc:
        return classify(row, exc, extra)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        log.warning("Slack unreachable; will retry", extra=extra | {"error": type(exc).__name__})
        return retry_later(row, None, type(exc).__name__)


def _broadcast(row: OutboxMessage, payload: Payload, settings: Settings) -> bool | None:
    """Errors may also show in the channel (BROADCAST_ERRORS); nothing else does."""
    if isinstance(payload, TransitionPayload) and row.thread_ts and settings.broadcast_errors:
        return status_of(payload.new_status) is Status.ERROR or None
    return None
