"""Delivery: send due outbox rows to Slack, once each.

A row is claimed (leased, attempts + 1), fenced, sent, then marked. The fence
is the promise between replicas: just before each post the lease is renewed by
the database's clock, and only if this replica still holds it (a batch can
outlive its lease when Slack is slow; another replica may have taken the rest).
The mark only touches a row that is still pending and still ours, so neither a
cancelled row nor another replica's row is ever changed by a late result.

If the process dies between Slack accepting the post and the mark, the row is
claimed again after its lease; a row with an earlier attempt first looks for
its own dedupe key in the thread's message metadata and, if Slack already has
it, is marked sent without posting again. That is what makes at-least-once
delivery tell each transition exactly once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import Float, Table, and_, bindparam, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot import rendering
from bot.config import Settings
from bot.faults import crash_point
from bot.http_util import parse_retry_after
from bot.metrics import Metrics
from bot.models import Status, TrainingSession, status_of
from bot.outbox import claim_due, fence
from bot.storage import OutboxMessage, db_now
from bot.subscriptions import end_subscriptions

log = logging.getLogger(__name__)

METADATA_EVENT = "rl_bot_notification"
PERMANENT_ERRORS = frozenset(
    {
        "channel_not_found",
        "is_archived",
        "channel_is_archived",
        "not_in_channel",
        "thread_not_found",
        "cannot_reply_to_message",
        "restricted_action",
        "access_denied",
        "team_access_not_granted",
        "is_inactive",
        "ekm_access_denied",
    }
)
AUTH_ERRORS = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "no_permission",
        "org_login_required",
    }
)
MAX_OTHER_ATTEMPTS = 5
MAX_BACKOFF_SECONDS = 300.0
AUTH_RETRY_SECONDS = 60.0
# The duplicate check reads at most this many pages of a thread (1,000 replies each).
MAX_CHECK_PAGES = 10


class CannotCheck(Exception):
    """Slack could not tell whether it already has a message (any reason)."""


@dataclass
class Outcome:
    row_id: int
    state: str  # sent | pending | dead | lost (the lease went to someone else: not sent)
    sent_ts: str | None = None
    retry_in: float | None = None
    error: str | None = None
    end_subscription: bool = False
    duplicate: bool = False


async def deliver_due(
    *,
    sessionmaker: async_sessionmaker[AsyncSession],
    slack: AsyncWebClient,
    settings: Settings,
    owner: str,
    metrics: Metrics | None = None,
    limit: int = 500,
) -> list[Outcome]:
    async with sessionmaker() as db, db.begin():
        rows = await claim_due(
            db,
            owner=owner,
            limit=limit,
            lease_seconds=settings.lease_seconds,
            channel_gap=settings.channel_min_interval_seconds,
        )
    if not rows:
        return []
    crash_point("deliver_after_claim", settings.fault_crash_at)
    semaphore = asyncio.Semaphore(settings.delivery_concurrency)

    async def one(row: OutboxMessage) -> Outcome:
        async with semaphore:
            return await _deliver_one(
                row, sessionmaker=sessionmaker, slack=slack, settings=settings, owner=owner
            )

    outcomes = await asyncio.gather(*(one(r) for r in rows))
    if metrics is not None:
        for row, o in zip(rows, outcomes, strict=True):  # gather keeps the order
            label = (
                "duplicate_skipped"
                if o.duplicate
                else {"pending": "retry", "lost": "lease_lost"}.get(o.state, o.state)
            )
            if o.error in AUTH_ERRORS:
                label = "auth_error"
            metrics.delivery_attempts.labels(outcome=label).inc()
            if o.state == "sent" and not o.duplicate and row.kind == "oncall":
                metrics.oncall_alerts.inc()
    return outcomes


async def _deliver_one(
    row: OutboxMessage,
    *,
    sessionmaker: async_sessionmaker[AsyncSession],
    slack: AsyncWebClient,
    settings: Settings,
    owner: str,
) -> Outcome:
    """Fence, send, mark: each row on its own, so a slow batch never outlives a lease
    unnoticed and each result is stored as soon as it is known."""
    extra = {"outbox_id": row.id, "channel_id": row.channel_id}
    async with sessionmaker() as db, db.begin():
        held = await fence(db, row.id, owner=owner, lease_seconds=settings.lease_seconds)
    if not held:
        log.info("outbox row no longer leased to this replica; not sending it", extra=extra)
        return Outcome(row.id, "lost")
    try:
        outcome = await send_one(row, slack=slack, settings=settings)
    except Exception as exc:  # never lose the row to a bug: retry it later
        log.exception("delivery failed unexpectedly", extra=extra)
        outcome = _retry(row, None, type(exc).__name__)
    try:
        async with sessionmaker() as db, db.begin():
            await record(db, [row], [outcome], owner=owner)
    except Exception:
        # The lease runs out; the next attempt finds a sent message by its dedupe key.
        log.exception("could not record a delivery result", extra=extra)
    return outcome


async def send_one(row: OutboxMessage, *, slack: AsyncWebClient, settings: Settings) -> Outcome:
    extra = {"outbox_id": row.id, "channel_id": row.channel_id, "session_id": row.session_id}
    try:
        if row.kind == "root":  # a change this subscription does not want told
            await _update_root(row, slack=slack)
            return Outcome(row.id, "sent", sent_ts=row.thread_ts)
        if row.attempts > 1 and (ts := await already_posted(slack, row)):
            log.info("outbox row already in Slack; not posting again", extra=extra)
            await _update_root(row, slack=slack)
            return Outcome(row.id, "sent", sent_ts=ts, duplicate=True)
        message = await render_row(row, slack=slack, settings=settings)
        response = await slack.chat_postMessage(
            channel=row.channel_id,
            thread_ts=row.thread_ts,
            text=message["text"],
            blocks=message["blocks"],
            metadata={
                "event_type": METADATA_EVENT,
                "event_payload": {"dedupe_key": row.dedupe_key},
            },
            reply_broadcast=_broadcast(row, settings),
            unfurl_links=False,
            unfurl_media=False,
        )
        crash_point("deliver_after_post", settings.fault_crash_at)
        await _update_root(row, slack=slack)
        crash_point("deliver_after_update", settings.fault_crash_at)
        return Outcome(row.id, "sent", sent_ts=str(response.get("ts") or ""))
    except SlackApiError as exc:
        return _classify(row, exc, extra)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        log.warning("Slack unreachable; will retry", extra=extra | {"error": type(exc).__name__})
        return _retry(row, None, type(exc).__name__)


def _broadcast(row: OutboxMessage, settings: Settings) -> bool | None:
    """Errors may also show in the channel (BROADCAST_ERRORS); nothing else does."""
    new_status = str(row.payload.get("new_status") or "")
    if row.kind == "transition" and row.thread_ts and settings.broadcast_errors:
        return status_of(new_status) is Status.ERROR or None
    return None


def _classify(row: OutboxMessage, exc: SlackApiError, extra: dict[str, Any]) -> Outcome:
    status = exc.response.status_code
    error = str(exc.response.get("error") or f"http_{status}")
    if status == 429 or error == "ratelimited":
        retry_after = _retry_after(exc)
        log.warning("Slack rate limited delivery", extra=extra | {"retry_after": retry_after})
        return _retry(row, retry_after, error)
    if status >= 500:
        return _retry(row, None, error)
    if error in AUTH_ERRORS:
        log.critical(
            "Slack rejected the bot token (%s); outbox kept, retrying in %ss",
            error,
            AUTH_RETRY_SECONDS,
            extra=extra,
        )
        return Outcome(row.id, "pending", retry_in=AUTH_RETRY_SECONDS, error=error)
    if error in PERMANENT_ERRORS:
        log.error("Slack refused delivery for good (%s); ending subscription", error, extra=extra)
        return Outcome(
            row.id, "dead", error=error, end_subscription=row.subscription_id is not None
        )
    if row.attempts >= MAX_OTHER_ATTEMPTS:
        log.error(
            "giving up on outbox row after %d attempts (%s)", row.attempts, error, extra=extra
        )
        return Outcome(row.id, "dead", error=error)
    return _retry(row, None, error)


def _retry_after(exc: SlackApiError) -> float:
    raw = exc.response.headers.get("Retry-After") or exc.response.headers.get("retry-after")
    seconds = parse_retry_after(raw)  # `nan`, `soon`, `-5`: as if absent
    return max(1.0, min(seconds if seconds is not None else 1.0, MAX_BACKOFF_SECONDS))


def _retry(row: OutboxMessage, retry_after: float | None, error: str) -> Outcome:
    delay = (
        retry_after
        if retry_after is not None
        else min(2.0 ** (row.attempts - 1), MAX_BACKOFF_SECONDS)
    )
    return Outcome(row.id, "pending", retry_in=delay, error=error)


async def already_posted(slack: AsyncWebClient, row: OutboxMessage) -> str | None:
    """The ts of a message carrying this row's dedupe key, if Slack has one.

    Any failure to check (no history scope, an error, an answer of an odd shape)
    means "cannot check": post, which risks a repeat but never a loss. Only a
    channel Slack says is gone for good is raised, to end the subscription."""
    try:
        return await _find_posted(slack, row)
    except SlackApiError as exc:
        error = exc.response.get("error")
        if isinstance(error, str) and error in PERMANENT_ERRORS:
            raise
        reason = error if isinstance(error, str) else f"HTTP {exc.response.status_code}"
    except Exception as exc:
        reason = type(exc).__name__
    log.warning(
        "cannot check Slack for an earlier post (%s); posting",
        str(reason)[:100],
        extra={"outbox_id": row.id},
    )
    return None


async def _find_posted(slack: AsyncWebClient, row: OutboxMessage) -> str | None:
    cursor: str | None = None
    for _ in range(MAX_CHECK_PAGES):
        if row.thread_ts:
            response = await slack.conversations_replies(
                channel=row.channel_id,
                ts=row.thread_ts,
                include_all_metadata=True,
                limit=1000,
                cursor=cursor,
            )
        else:
            # Stored times are naive UTC: say so, or .timestamp() reads them as local time.
            created = row.created_at.replace(tzinfo=UTC).timestamp() if row.created_at else 60.0
            response = await slack.conversations_history(
                channel=row.channel_id,
                oldest=f"{created - 60:.6f}",
                include_all_metadata=True,
                limit=1000,
                cursor=cursor,
            )
        messages = response.get("messages")
        if not isinstance(messages, list):
            raise CannotCheck("no list of messages")
        for message in messages:
            if _carries(message, row.dedupe_key):
                return str(message["ts"])
        meta = response.get("response_metadata")
        cursor = meta.get("next_cursor") if isinstance(meta, dict) else None
        if not cursor or not isinstance(cursor, str):
            return None
    raise CannotCheck(f"more than {MAX_CHECK_PAGES} pages")


def _carries(message: object, dedupe_key: str) -> bool:
    """Whether a listed message is one of ours with this dedupe key."""
    if not isinstance(message, dict) or not isinstance(message.get("metadata"), dict):
        return False
    metadata = message["metadata"]
    payload = metadata.get("event_payload")
    return (
        metadata.get("event_type") == METADATA_EVENT
        and isinstance(payload, dict)
        and payload.get("dedupe_key") == dedupe_key
    )


def _session(payload: dict[str, Any], row: OutboxMessage) -> TrainingSession:
    snapshot = payload.get("session")
    if isinstance(snapshot, dict):
        return TrainingSession.model_validate(snapshot)
    return TrainingSession(
        id=row.session_id or "unknown", status=str(payload.get("old_status", ""))
    )


async def render_row(
    row: OutboxMessage, *, slack: AsyncWebClient, settings: Settings
) -> rendering.Message:
    payload = row.payload
    if row.kind == "transition":
        return rendering.transition_message(
            _session(payload, row),
            str(payload["old_status"]),
            str(payload["new_status"]),
            ended=bool(payload.get("ended")),
            gone=bool(payload.get("gone")),
        )
    if row.kind == "checkpoints":
        items = payload.get("items")
        return rendering.checkpoint_message(
            _session(payload, row), items if isinstance(items, list) else []
        )
    if row.kind == "digest":
        message = payload.get("message")
        if isinstance(message, dict) and message.get("text"):
            return {"text": str(message["text"]), "blocks": list(message.get("blocks") or [])}
        return rendering.notice("(empty digest)")
    if row.kind == "oncall":
        permalink = None
        if payload.get("thread_channel") and payload.get("thread_ts"):
            try:
                link = await slack.chat_getPermalink(
                    channel=str(payload["thread_channel"]), message_ts=str(payload["thread_ts"])
                )
                permalink = str(link.get("permalink") or "") or None
            except (SlackApiError, aiohttp.ClientError, TimeoutError):
                log.warning("no permalink for on-call alert", extra={"outbox_id": row.id})
        return rendering.oncall_alert(
            _session(payload, row), permalink=permalink, mention=settings.oncall_mention
        )
    return rendering.operator_alert(
        str(payload.get("title", "rl-bot")),
        str(payload.get("detail", "")),
        mention=settings.oncall_mention,
    )


async def _update_root(row: OutboxMessage, *, slack: AsyncWebClient) -> None:
    """Keep the subscription's root message showing the current card."""
    if (
        row.kind not in ("transition", "root", "checkpoints")
        or not row.thread_ts
        or row.payload.get("session") is None
    ):
        return
    session = _session(row.payload, row)
    card = rendering.card(session, subscribed=not row.payload.get("ended"))
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
            # chat.update has its own, lower rate limit: retry the whole row later.
            # Its thread reply is then found by its dedupe key, not posted again.
            raise
        # An uneditable root (deleted, too old) is logged, not retried.
        log.warning(
            "could not update root message: %s",
            exc.response.get("error"),
            extra={"outbox_id": row.id, "channel_id": row.channel_id},
        )


async def record(
    db: AsyncSession, rows: list[OutboxMessage], outcomes: list[Outcome], *, owner: str
) -> None:
    """Store results, but only on rows still pending and still leased to `owner`:
    a row cancelled meanwhile (unsubscribed) stays cancelled, and a row another
    replica took over is left to it (it checks Slack before posting again)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for o in outcomes:
        error = o.error[:300] if o.error else None
        if o.state == "sent":
            groups["sent"].append(
                {"b_id": o.row_id, "state": "sent", "sent_ts": o.sent_ts, "last_error": None}
            )
        elif o.state == "dead":
            groups["dead"].append({"b_id": o.row_id, "state": "dead", "last_error": error})
        elif o.state == "pending":
            groups["pending"].append(
                {
                    "b_id": o.row_id,
                    "state": "pending",
                    "last_error": error,
                    "b_retry_in": float(o.retry_in or 1.0),
                }
            )
    table = OutboxMessage.__table__
    assert isinstance(table, Table)
    mine = and_(
        table.c.id == bindparam("b_id"),
        table.c.state == "pending",
        table.c.lease_owner == owner,
    )
    extra: dict[str, dict[str, Any]] = {
        "sent": {"sent_at": db_now()},
        "dead": {},
        "pending": {"next_attempt_at": db_now(bindparam("b_retry_in", type_=Float()))},
    }
    for state, params in groups.items():
        columns = [k for k in params[0] if not k.startswith("b_")]
        await db.execute(
            update(table)
            .where(mine)
            .values(
                {c: bindparam(c) for c in columns}
                | extra[state]
                | {"lease_owner": None, "lease_until": None}
            ),
            params,
        )
    by_id = {r.id: r for r in rows}
    ended = [by_id[o.row_id].subscription_id for o in outcomes if o.end_subscription]
    if ended:
        await end_subscriptions(
            db, [i for i in ended if i is not None], reason="slack refused delivery"
        )
