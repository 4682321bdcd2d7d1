"""The outbox's table: one row per Slack message owed, with its lease and its
retry schedule. What a row says is its contract (`bot.outbox.contract`)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, DateTime, Enum, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from bot.outbox.contract.payloads import Kind, Payload, read_payload
from bot.outbox.contract.rows import State
from bot.store.tables import Base, BigId, utcnow


def _enum_column(enum: type[StrEnum], length: int) -> Enum:
    """A StrEnum stored as its value in a plain string column (no native enum type,
    no CHECK): the schema stays what it was, and Python sees the enum."""
    return Enum(
        enum,
        native_enum=False,
        create_constraint=False,
        length=length,
        values_callable=lambda members: [m.value for m in members],
    )


class OutboxMessage(Base):
    """One Slack message owed: a transition told in a thread, or an alert.

    `dedupe_key` is unique, so writing the same transition twice is a no-op,
    and it rides along in the message metadata so a retry after a crash can
    see that Slack already has it.
    """

    __tablename__ = "outbox"
    __table_args__ = (
        Index("ix_outbox_pending_due", "state", "next_attempt_at"),
        Index("ix_outbox_channel_state", "channel_id", "state"),
        Index("ix_outbox_channel_sent", "channel_id", "sent_at"),
        Index("ix_outbox_subscription", "subscription_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    dedupe_key: Mapped[str] = mapped_column(String(400), unique=True)
    kind: Mapped[Kind] = mapped_column(_enum_column(Kind, 32))
    subscription_id: Mapped[int | None] = mapped_column(
        ForeignKey("subscriptions.id", ondelete="CASCADE"), nullable=True
    )
    # Text: on-call rows carry ids from Together's list endpoint, of any length.
    session_id: Mapped[str | None] = mapped_column(Text(), nullable=True)
    channel_id: Mapped[str] = mapped_column(String(32))
    thread_ts: Mapped[str | None] = mapped_column(String(32), nullable=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON())
    state: Mapped[State] = mapped_column(_enum_column(State, 16), default=State.PENDING)
    attempts: Mapped[int] = mapped_column(Integer(), default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow)
    lease_owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text(), nullable=True)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    # Set the moment Slack takes the row's post: a pending row with a sent_ts owes
    # only its root card's redraw, and is never posted again.
    sent_ts: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow)

    @property
    def typed_payload(self) -> Payload:
        return read_payload(self.kind, self.payload)
