"""What became of one row (`SendResult`), and how Slack's refusals decide it.

A rate limit waits as long as Slack asks (bounded), a server error backs off
and retries, a rejected token keeps the whole outbox and retries soon, a
channel or thread gone for good kills the row and ends its subscription, and
any other refusal is retried up to `MAX_OTHER_ATTEMPTS` times. Whatever the
reason, a row is retried DELIVERY_MAX_ATTEMPTS times at most (`give_up`), so
no row blocks its channel for good; only a rejected token, which no row can
get past, keeps the whole outbox until it works again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from bot.ops.retry_after import parse_retry_after
from bot.outbox.contract.payloads import Kind
from bot.outbox.contract.rows import State
from bot.outbox.order import CARD_ONLY
from bot.outbox.table import OutboxMessage
from bot.slack_web import RefusalKind, SlackApiError, refusal_of
from bot.slack_web.refusals import AUTH_ERRORS

log = logging.getLogger(__name__)

MAX_OTHER_ATTEMPTS = 5
# The longest a row waits before Slack is asked again.
MAX_SEND_BACKOFF_SECONDS = 300.0
AUTH_RETRY_SECONDS = 60.0

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
    #: set aside after its retries ran out: on-call hears of it once
    tell_operators: bool = False
    #: the root card went out only without its chart (the workspace refused it)
    chart_refused: bool = False


def classify(row: OutboxMessage, exc: SlackApiError, extra: dict[str, Any]) -> SendResult:
    """What Slack's refusal of a row's post (or its root card's update) means for it."""
    refusal = refusal_of(exc, dm=row.kind == Kind.CREATOR_DM)
    error = refusal.error
    if refusal.kind is RefusalKind.RATE_LIMITED:
        retry_after = _retry_after(exc)
        log.warning("Slack rate limited delivery", extra=extra | {"retry_after": retry_after})
        return retry_later(row, retry_after, error)
    if refusal.kind is RefusalKind.SERVER:
        return retry_later(row, None, error)
    if refusal.kind is RefusalKind.AUTH:
        log.critical(
            "Slack rejected the bot token (%s); outbox kept, retrying in %ss",
            error,
            AUTH_RETRY_SECONDS,
            extra=extra,
        )
        return SendResult(row.id, State.PENDING, retry_in=AUTH_RETRY_SECONDS, error=error)
    if refusal.kind is RefusalKind.DM_REFUSED:
        log.warning("Slack refused a DM to a session's creator (%s); set aside", error, extra=extra)
        return SendResult(row.id, State.DEAD, error=f"DM refused: {error}")
    if refusal.kind is RefusalKind.GONE:
        log.error("Slack refused delivery for good (%s); ending subscription", error, extra=extra)
        return SendResult(
            row.id, State.DEAD, error=error, end_subscription=row.subscription_id is not None
        )
    if row.attempts >= MAX_OTHER_ATTEMPTS:
        log.error(
            "giving up on outbox row after %d attempts (%s)", row.attempts, error, extra=extra
        )
        return SendResult(row.id, State.DEAD, error=error, tell_operators=True)
    return retry_later(row, None, error)


def give_up(row: OutboxMessage, outcome: SendResult, max_attempts: int) -> SendResult:
    """A retry past the row's last attempt (`max_attempts`) becomes its end: a row
    never posted is dead (on-call told of a message), a posted row whose root card Slack kept
    refusing is sent (the card waits for the next redraw). A rejected token is
    no row's fault and keeps it."""
    if (
        outcome.state != State.PENDING
        or row.attempts < max_attempts
        or outcome.error in AUTH_ERRORS
    ):
        return outcome
    extra = {"outbox_id": row.id, "channel_id": row.channel_id, "error": outcome.error}
    if outcome.sent_ts is not None:
        log.warning("root card not redrawn after %d attempts; giving up", row.attempts, extra=extra)
        return SendResult(
            row.id,
            State.SENT,
            sent_ts=outcome.sent_ts,
            error=f"root card not redrawn: {outcome.error}",
            duplicate=outcome.duplicate,
        )
    log.error(
        "giving up on outbox row after %d attempts (%s)", row.attempts, outcome.error, extra=extra
    )
    # A card-only row (a change not told, a redraw) owed a card redraw, not a message.
    return SendResult(
        row.id, State.DEAD, error=outcome.error, tell_operators=row.kind not in CARD_ONLY
    )


def _retry_after(exc: SlackApiError) -> float:
    raw = exc.response.headers.get("Retry-After") or exc.response.headers.get("retry-after")
    seconds = parse_retry_after(raw)  # `nan`, `soon`, `-5`: as if absent
    return max(1.0, min(seconds if seconds is not None else 1.0, MAX_SEND_BACKOFF_SECONDS))


def retry_later(row: OutboxMessage, retry_after: float | None, error: str) -> SendResult:
    """Pending again, after `retry_after` when Slack said, else backing off by attempt."""
    delay = (
        retry_after
        if retry_after is not None
        else min(2.0 ** (row.attempts - 1), MAX_SEND_BACKOFF_SECONDS)
    )
    return SendResult(row.id, State.PENDING, retry_in=delay, error=error)
