"""Storing what became of a delivered row, on a row that is still ours.

Two writes per row: the post, the moment Slack takes it (`record_posted`),
and the row's end state once its root card is redrawn too (`record`). A row
that is pending with a `sent_ts` is therefore one whose message Slack has and
whose root card is still owed: its retries redraw the card and never post
again, whether or not the thread can be read.
"""

from __future__ import annotations

from typing import Any

from bot.delivery.outcome import SendResult
from bot.outbox.contract.payloads import Kind
from bot.outbox.contract.rows import OutboxRow, State, bounded_key, operator_row
from bot.outbox.queue import insert_outbox
from bot.outbox.results import hand_back_row, mark_posted, store_result
from bot.outbox.table import OutboxMessage
from bot.store.session import Db
from bot.store.tables import db_now
from bot.subscriptions.service import end_subscriptions

# outbox.sent_ts is a String(32); a Slack ts is 17 characters.
MAX_TS_LENGTH = 32


def stored_ts(value: str | None) -> str | None:
    """A message ts as it can be stored: an odd one (longer than the column, not
    printable) is dropped, not left to make the write fail (and the row be
    retried, and posted, again)."""
    if not value or len(value) > MAX_TS_LENGTH or not value.isprintable():
        return None
    return value


def stored_error(error: str | None) -> str | None:
    """Slack's error as it can be stored: printable (PostgreSQL refuses a NUL, and a
    result that cannot be stored leaves the row to be retried without end), short."""
    if not error:
        return None
    return "".join(c if c.isprintable() else "?" for c in error[:300])


def posted_mark(row: OutboxMessage, ts: str | None) -> str:
    """What a posted row keeps in `sent_ts`: the message's ts, or (an answer
    without a usable one) the thread's, or an empty string: never NULL."""
    return stored_ts(ts) or row.thread_ts or ""


async def record_posted(db: Db, row: OutboxMessage, mark: str, *, owner: str) -> bool:
    """Store that Slack has the row's message (`mark`, see `posted_mark`), on a
    row still leased to `owner`. True when the row is still pending, so its root
    card is still owed."""
    return await mark_posted(db, row.id, mark, owner=owner)


async def record(
    db: Db,
    row: OutboxMessage,
    outcome: SendResult,
    *,
    owner: str,
    oncall_channel: str | None = None,
) -> bool:
    """Store a row's result, but only on a row still pending and still leased to
    `owner`: a row cancelled meanwhile (unsubscribed) stays cancelled, and a row
    another replica took over is left to it. A cancelled row's lease is handed
    back all the same: an unsubscribe waits for it (`in_flight`). A row set aside
    after its retries ran out is told to `oncall_channel` once, in the same
    transaction (an operator note that is itself set aside tells nobody).
    True when the result was stored."""
    error = stored_error(outcome.error)
    values: dict[str, Any]
    if outcome.state == State.SENT:
        values = {
            "state": State.SENT,
            "sent_ts": stored_ts(outcome.sent_ts),
            "sent_at": db_now(),
            "last_error": error,
        }
    elif outcome.state in (State.DEAD, State.CANCELLED):
        values = {"state": outcome.state, "last_error": error}
    elif outcome.state == State.PENDING:
        values = {"last_error": error, "next_attempt_at": db_now(float(outcome.retry_in or 1.0))}
        if outcome.sent_ts is not None:  # posted: only the root card is owed
            values["sent_ts"] = outcome.sent_ts
    else:
        values = {}
    stored = False
    if values:
        stored = await store_result(db, row.id, values, owner=owner)
    if not stored:  # cancelled while in flight: hand the lease back all the same
        await hand_back_row(db, row.id, owner=owner)
    if stored and outcome.end_subscription and row.subscription_id is not None:
        await end_subscriptions(db, [row.subscription_id], reason="slack refused delivery")
    if stored and outcome.tell_operators and oncall_channel and row.kind != Kind.OPERATOR:
        await insert_outbox(db, [_set_aside_note(oncall_channel, row, error)])
    return stored


def _set_aside_note(channel: str, row: OutboxMessage, error: str | None) -> OutboxRow:
    session = f" about session {row.session_id[:128]}" if row.session_id else ""
    return operator_row(
        channel,
        bounded_key("delivery-dead", str(row.id)),
        "A message could not be delivered",
        f"Slack refused a {row.kind} message{session} for <#{row.channel_id}> "
        f"{row.attempts} times ({(error or 'no answer')[:100]}); it was set aside so "
        "the channel's later messages go on.",
    )
