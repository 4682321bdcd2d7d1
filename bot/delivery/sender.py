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
from datetime import UTC, timedelta
from typing import Any, Literal

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import Float, Table, and_, bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot import rendering, root_card
from bot.alerts.stall import threshold
from bot.config import Settings
from bot.faults import crash_point
from bot.metrics import Metrics
from bot.outbox.queue import (
    CheckpointsPayload,
    DigestPayload,
    IdlePayload,
    Kind,
    OncallPayload,
    OperatorPayload,
    OutboxMessage,
    Payload,
    ProgressPayload,
    RootPayload,
    State,
    TransitionPayload,
    claim_due,
    end_subscriptions,
    fence,
)
from bot.rate_limits import parse_retry_after
from bot.rendering import watch as rendering_watch
from bot.root_card import CardWatch
from bot.store.tables import Subscription, WatchedSession, db_now, utcnow
from bot.together.client import TogetherClient, TogetherError
from bot.training.shapes import CostEstimate, ModelResource, Status, TrainingSession, status_of

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
# The longest a row waits before Slack is asked again.
MAX_SEND_BACKOFF_SECONDS = 300.0
AUTH_RETRY_SECONDS = 60.0
# The duplicate check reads at most this many pages of a thread (1,000 replies each).
MAX_CHECK_PAGES = 10


class CannotCheck(Exception):
    """Slack could not tell whether it already has a message (any reason)."""


# The lease went to someone else: not sent, and nothing is recorded.
LOST: Literal["lost"] = "lost"


@dataclass
class SendResult:
    """What became of one row: its new state (or LOST), and what to store."""

    row_id: int
    state: State | Literal["lost"]
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
    together: TogetherClient | None = None,
) -> list[SendResult]:
    """Claim, fence and send the due rows. `together`, when given, is asked for
    what a message is better with (a slow start's place in the GPU queue)."""
    async with sessionmaker() as db, db.begin():
        rows = await claim_due(
            db,
            owner=owner,
            limit=limit,
            lease_seconds=settings.lease_seconds,
            channel_gap=settings.channel_min_interval_seconds,
        )
        watches = await card_watches(db, rows, settings=settings) if rows else {}
    if not rows:
        return []
    crash_point("deliver_after_claim", settings.fault_crash_at)
    semaphore = asyncio.Semaphore(settings.delivery_concurrency)

    async def one(row: OutboxMessage) -> SendResult:
        async with semaphore:
            return await _deliver_one(
                row,
                sessionmaker=sessionmaker,
                slack=slack,
                settings=settings,
                owner=owner,
                together=together,
                watch=watches.get(row.subscription_id or 0),
            )

    outcomes = await asyncio.gather(*(one(r) for r in rows))
    if metrics is not None:
        for row, o in zip(rows, outcomes, strict=True):  # gather keeps the order
            label = (
                "duplicate_skipped"
                if o.duplicate
                else {State.PENDING: "retry", LOST: "lease_lost"}.get(o.state, o.state)
            )
            if o.error in AUTH_ERRORS:
                label = "auth_error"
            metrics.delivery_attempts.labels(outcome=label).inc()
            if (
                o.state == State.SENT
                and not o.duplicate
                and isinstance(row.typed_payload, OncallPayload)
            ):
                metrics.oncall_alerts.inc()
    return outcomes


#: kinds whose delivery redraws the subscription's root card
_ROOT_KINDS = frozenset({Kind.TRANSITION, Kind.ROOT, Kind.CHECKPOINTS, Kind.PROGRESS})


async def card_watches(
    db: AsyncSession, rows: list[OutboxMessage], *, settings: Settings
) -> dict[int, CardWatch]:
    """What the root cards of these rows show beyond the session, by subscription:
    the watch's current state, the thread's `target=` and stall threshold. One
    read for the whole batch, so every redraw renders from the same state."""
    ids = sorted(
        {r.subscription_id for r in rows if r.subscription_id is not None and r.kind in _ROOT_KINDS}
    )
    if not ids:
        return {}
    found = await db.execute(
        select(
            Subscription.id,
            Subscription.target_step,
            Subscription.stall_after_minutes,
            WatchedSession.progress,
        )
        .join(WatchedSession, WatchedSession.session_id == Subscription.session_id)
        .where(Subscription.id.in_(ids))
    )
    minutes = settings.stall_after_minutes
    default = timedelta(minutes=minutes) if minutes > 0 else None
    return {
        r.id: CardWatch(
            progress=r.progress,
            target=r.target_step,
            stall_after=threshold(r.stall_after_minutes, default),
        )
        for r in found
    }


async def _deliver_one(
    row: OutboxMessage,
    *,
    sessionmaker: async_sessionmaker[AsyncSession],
    slack: AsyncWebClient,
    settings: Settings,
    owner: str,
    together: TogetherClient | None = None,
    watch: CardWatch | None = None,
) -> SendResult:
    """Fence, send, mark: each row on its own, so a slow batch never outlives a lease
    unnoticed and each result is stored as soon as it is known."""
    extra = {"outbox_id": row.id, "channel_id": row.channel_id}
    async with sessionmaker() as db, db.begin():
        held = await fence(db, row.id, owner=owner, lease_seconds=settings.lease_seconds)
    if not held:
        log.info("outbox row no longer leased to this replica; not sending it", extra=extra)
        return SendResult(row.id, LOST)
    try:
        outcome = await send_one(
            row, slack=slack, settings=settings, together=together, watch=watch
        )
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
            await _update_root(row, payload, slack=slack, watch=watch)
            return SendResult(row.id, State.SENT, sent_ts=row.thread_ts)
        if row.attempts > 1 and (ts := await already_posted(slack, row)):
            log.info("outbox row already in Slack; not posting again", extra=extra)
            await _update_root(row, payload, slack=slack, watch=watch)
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
        await _update_root(row, payload, slack=slack, watch=watch)
        crash_point("deliver_after_update", settings.fault_crash_at)
        return SendResult(row.id, State.SENT, sent_ts=str(response.get("ts") or ""))
    except SlackApiError as exc:
        return _classify(row, exc, extra)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        log.warning("Slack unreachable; will retry", extra=extra | {"error": type(exc).__name__})
        return _retry(row, None, type(exc).__name__)


def _broadcast(row: OutboxMessage, payload: Payload, settings: Settings) -> bool | None:
    """Errors may also show in the channel (BROADCAST_ERRORS); nothing else does."""
    if isinstance(payload, TransitionPayload) and row.thread_ts and settings.broadcast_errors:
        return status_of(payload.new_status) is Status.ERROR or None
    return None


def _classify(row: OutboxMessage, exc: SlackApiError, extra: dict[str, Any]) -> SendResult:
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
        return SendResult(row.id, State.PENDING, retry_in=AUTH_RETRY_SECONDS, error=error)
    if error in PERMANENT_ERRORS:
        log.error("Slack refused delivery for good (%s); ending subscription", error, extra=extra)
        return SendResult(
            row.id, State.DEAD, error=error, end_subscription=row.subscription_id is not None
        )
    if row.attempts >= MAX_OTHER_ATTEMPTS:
        log.error(
            "giving up on outbox row after %d attempts (%s)", row.attempts, error, extra=extra
        )
        return SendResult(row.id, State.DEAD, error=error)
    return _retry(row, None, error)


def _retry_after(exc: SlackApiError) -> float:
    raw = exc.response.headers.get("Retry-After") or exc.response.headers.get("retry-after")
    seconds = parse_retry_after(raw)  # `nan`, `soon`, `-5`: as if absent
    return max(1.0, min(seconds if seconds is not None else 1.0, MAX_SEND_BACKOFF_SECONDS))


def _retry(row: OutboxMessage, retry_after: float | None, error: str) -> SendResult:
    delay = (
        retry_after
        if retry_after is not None
        else min(2.0 ** (row.attempts - 1), MAX_SEND_BACKOFF_SECONDS)
    )
    return SendResult(row.id, State.PENDING, retry_in=delay, error=error)


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


def _session(snapshot: dict[str, Any] | None, row: OutboxMessage) -> TrainingSession:
    """The session a row speaks of, from its snapshot (very old rows have none)."""
    if snapshot is not None:
        return TrainingSession.model_validate(snapshot)
    return TrainingSession(id=row.session_id or "unknown", status="")


async def render_row(
    row: OutboxMessage,
    *,
    slack: AsyncWebClient,
    settings: Settings,
    together: TogetherClient | None = None,
) -> rendering.Message:
    """The message a row posts; a root row posts none (it only edits the root card)."""
    match row.typed_payload:
        case TransitionPayload() as p:
            session = (
                _session(p.session, row)
                if p.session is not None
                else TrainingSession(id=row.session_id or "unknown", status=p.old_status)
            )
            return rendering.transition_message(
                session, p.old_status, p.new_status, ended=p.ended, gone=p.gone
            )
        case CheckpointsPayload() as p:
            return rendering.checkpoint_message(_session(p.session, row), p.items, more=p.more)
        case DigestPayload(message=dict() as stored):  # queued before digests were data
            if stored.get("text"):
                return {"text": str(stored["text"]), "blocks": list(stored.get("blocks") or [])}
            return rendering.notice("(empty digest)")
        case DigestPayload() as p:
            return rendering.digest_message(
                p.day,
                [rendering.SessionLine(s.session_id, s.display_name, s.status) for s in p.sessions],
                [rendering.StatusChange(c.name, c.old_status, c.new_status) for c in p.changes],
            )
        case OncallPayload() as p:
            permalink = None
            if p.thread_channel and p.thread_ts:
                permalink = await _permalink(slack, p.thread_channel, p.thread_ts, row)
            return rendering.oncall_alert(
                _session(p.session, row), permalink=permalink, mention=settings.oncall_mention
            )
        case OperatorPayload() as p:
            return rendering.operator_alert(p.title, p.detail, mention=settings.oncall_mention)
        case ProgressPayload() as p:
            return await _progress_message(
                row, p, slack=slack, settings=settings, together=together
            )
        case IdlePayload() as p:
            return rendering_watch.idle_resource_alert(
                ModelResource.model_validate(p.resource),
                idle_since=p.idle_since,
                now=utcnow(),
                sessions=[_session(s, row) for s in p.sessions],
                price=CostEstimate(currency=p.currency or "USD", price_per_hour=p.price_per_hour)
                if p.price_per_hour is not None
                else None,
                mention=settings.oncall_mention if p.page else None,
            )
        case RootPayload():
            raise ValueError("a root row posts no message")


async def _progress_message(
    row: OutboxMessage,
    p: ProgressPayload,
    *,
    slack: AsyncWebClient,
    settings: Settings,
    together: TogetherClient | None,
) -> rendering.Message:
    """A stall (in the thread, or on-call's page with the thread linked), its end,
    or a slow start."""
    session = _session(p.session, row)
    if p.event == "resumed":
        return rendering_watch.resumed_message(
            session, old_step=p.step, new_step=p.new_step, stalled_for=timedelta(seconds=p.seconds)
        )
    if p.event == "creating":
        resource = None
        if together is not None and session.model_resources_id:
            try:  # its place in the GPU queue, when Together gives one
                resource = await together.get_model_resource(session.model_resources_id)
            except TogetherError as exc:
                log.info("no model resource for a slow start: %s", exc, extra={"outbox_id": row.id})
        return rendering_watch.creating_message(
            session, waited=timedelta(seconds=p.seconds), resource=resource
        )
    permalink = None
    if p.page and p.thread_channel and p.thread_ts:
        permalink = await _permalink(slack, p.thread_channel, p.thread_ts, row)
    return rendering_watch.stalled_message(
        session,
        step=p.step,
        since=p.since,
        stalled_for=timedelta(seconds=p.seconds),
        idles_out_at=p.idles_out_at,
        idles_out_estimated=p.idles_out_estimated,
        mention=settings.oncall_mention if p.page else None,
        permalink=permalink,
    )


async def _permalink(
    slack: AsyncWebClient, channel: str, ts: str, row: OutboxMessage
) -> str | None:
    try:
        link = await slack.chat_getPermalink(channel=channel, message_ts=ts)
    except (SlackApiError, aiohttp.ClientError, TimeoutError):
        log.warning("no permalink for an on-call alert", extra={"outbox_id": row.id})
        return None
    return str(link.get("permalink") or "") or None


async def _update_root(
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
    card = rendering.card(_session(payload.session, row), subscribed=not ended)
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
            # chat.update has its own, lower rate limit: retry the whole row later.
            # Its thread reply is then found by its dedupe key, not posted again.
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


async def record(
    db: AsyncSession, rows: list[OutboxMessage], outcomes: list[SendResult], *, owner: str
) -> None:
    """Store results, but only on rows still pending and still leased to `owner`:
    a row cancelled meanwhile (unsubscribed) stays cancelled, and a row another
    replica took over is left to it (it checks Slack before posting again)."""
    groups: dict[State, list[dict[str, Any]]] = defaultdict(list)
    for o in outcomes:
        error = o.error[:300] if o.error else None
        if o.state == State.SENT:
            groups[State.SENT].append(
                {"b_id": o.row_id, "state": State.SENT, "sent_ts": o.sent_ts, "last_error": None}
            )
        elif o.state == State.DEAD:
            groups[State.DEAD].append({"b_id": o.row_id, "state": State.DEAD, "last_error": error})
        elif o.state == State.PENDING:
            groups[State.PENDING].append(
                {
                    "b_id": o.row_id,
                    "state": State.PENDING,
                    "last_error": error,
                    "b_retry_in": float(o.retry_in or 1.0),
                }
            )
    table = OutboxMessage.__table__
    assert isinstance(table, Table)
    mine = and_(
        table.c.id == bindparam("b_id"),
        table.c.state == State.PENDING,
        table.c.lease_owner == owner,
    )
    extra: dict[State, dict[str, Any]] = {
        State.SENT: {"sent_at": db_now()},
        State.DEAD: {},
        State.PENDING: {"next_attempt_at": db_now(bindparam("b_retry_in", type_=Float()))},
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
