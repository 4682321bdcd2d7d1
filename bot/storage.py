"""Database tables: subscriptions, per-session watch state, the notification
outbox and operator incidents.

Times are naive UTC throughout (`utcnow()`), so SQLite and PostgreSQL compare
them the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


# SQLite only autoincrements INTEGER PRIMARY KEY; PostgreSQL gets BIGINT.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Subscription(Base):
    __tablename__ = "subscriptions"
    __table_args__ = (
        UniqueConstraint(
            "team_id", "channel_id", "session_id", name="uq_subscriptions_channel_session"
        ),
        Index("ix_subscriptions_session_active", "session_id", "active"),
        Index("ix_subscriptions_channel_active", "channel_id", "active"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    team_id: Mapped[str] = mapped_column(String(32))
    channel_id: Mapped[str] = mapped_column(String(32))
    session_id: Mapped[str] = mapped_column(String(128))
    root_ts: Mapped[str] = mapped_column(String(32))
    subscribed_by: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow)
    active: Mapped[bool] = mapped_column(Boolean(), default=True)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    ended_reason: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # Comma-separated: status, checkpoints, errors-only.
    filters: Mapped[str] = mapped_column(String(64), default="status", server_default="status")
    muted_until: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)

    @property
    def filter_set(self) -> frozenset[str]:
        return frozenset(f for f in self.filters.split(",") if f)


class WatchedSession(Base):
    """What the poller last saw of one session, and who holds its lease."""

    __tablename__ = "watched_sessions"
    __table_args__ = (Index("ix_watched_sessions_due", "active", "next_poll_at"),)

    session_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    active: Mapped[bool] = mapped_column(Boolean(), default=True)
    last_status: Mapped[str] = mapped_column(String(64))
    last_updated_at: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error_key: Mapped[str | None] = mapped_column(String(300), nullable=True)
    error_message: Mapped[str | None] = mapped_column(Text(), nullable=True)
    training_checkpoints: Mapped[int] = mapped_column(Integer(), default=0)
    inference_checkpoints: Mapped[int] = mapped_column(Integer(), default=0)
    snapshot: Mapped[dict[str, object]] = mapped_column(JSON())
    # What checkpoints (and registrations) were already seen, to tell only new ones.
    checkpoint_keys: Mapped[list[str] | None] = mapped_column(JSON(), nullable=True)
    transition_seq: Mapped[int] = mapped_column(Integer(), default=0)
    next_poll_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow)
    last_polled_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    consecutive_failures: Mapped[int] = mapped_column(Integer(), default=0)
    last_failure: Mapped[str | None] = mapped_column(String(300), nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow, onupdate=utcnow)


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
    kind: Mapped[str] = mapped_column(String(32))
    subscription_id: Mapped[int | None] = mapped_column(
        ForeignKey("subscriptions.id", ondelete="CASCADE"), nullable=True
    )
    session_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    channel_id: Mapped[str] = mapped_column(String(32))
    thread_ts: Mapped[str | None] = mapped_column(String(32), nullable=True)
    payload: Mapped[dict[str, object]] = mapped_column(JSON())
    state: Mapped[str] = mapped_column(String(16), default="pending")  # pending|sent|dead|cancelled
    attempts: Mapped[int] = mapped_column(Integer(), default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow)
    lease_owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    last_error: Mapped[str | None] = mapped_column(String(300), nullable=True)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    sent_ts: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow)


class Incident(Base):
    """Operator incidents (Together key rejected, Together unreachable): one alert each."""

    __tablename__ = "incidents"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    opened_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    alerted_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    detail: Mapped[str | None] = mapped_column(String(300), nullable=True)
    seq: Mapped[int] = mapped_column(Integer(), default=0)


class ChannelSettings(Base):
    """Per-channel preferences: the daily digest time and its time zone."""

    __tablename__ = "channel_settings"

    team_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    channel_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    digest_time: Mapped[str | None] = mapped_column(String(5), nullable=True)
    digest_tz: Mapped[str] = mapped_column(String(64), default="UTC")
    last_digest_on: Mapped[str | None] = mapped_column(String(10), nullable=True)
    updated_by: Mapped[str | None] = mapped_column(String(32), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow)


class Job(Base):
    """A periodic job only one replica may run at a time (lease), with its own state."""

    __tablename__ = "jobs"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    lease_owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    baseline_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    last_run_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
