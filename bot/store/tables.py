"""Database tables: subscriptions, per-session watch state, operator incidents,
the on-call alerts already sent, channel settings and job locks. The
notification outbox's table lives with its queries, in `bot.outbox.queue`.

Times are naive UTC throughout, so SQLite and PostgreSQL compare them the same
way. Leases and outbox schedules use the database's clock (`db_now`), never a
replica's: replicas' clocks disagree, and a lease must mean the same to all.
Columns that hold text from Slack or Together are unbounded (`Text`); keys
built from such text are hashed when long (`bot.outbox.contract.rows.bounded_key`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    literal,
    select,
    true,
)
from sqlalchemy.exc import CompileError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.functions import FunctionElement

from bot.ops.faults import clock_skew
from bot.store.typed_json import PydanticJSON
from bot.training.poll_progress import PollProgress
from bot.training.snapshots import SessionSnapshot

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """This process's clock, naive UTC. Leases never compare it: see `db_now`."""
    return datetime.now(UTC).replace(tzinfo=None) + clock_skew()


class DbNow(FunctionElement[datetime]):
    """The database's clock, naive UTC, plus some seconds (see `db_now`)."""

    type = DateTime()
    name = "db_now"
    inherit_cache = True


def db_now(seconds: float | ColumnElement[Any] = 0.0) -> DbNow:
    """SQL for "the database's now (naive UTC) + `seconds`": one clock for every replica.

    `seconds` may be a bound parameter, for a different delay per row of an executemany."""
    return DbNow(
        seconds if isinstance(seconds, ColumnElement) else literal(float(seconds), Float())
    )


async def database_now(db: AsyncSession) -> datetime:
    """The database's now (naive UTC): the one clock every replica shares, for a
    time that is kept or compared beyond one statement."""
    return (await db.execute(select(db_now()))).scalar_one()


@compiles(DbNow, "postgresql")
def _db_now_postgresql(element: DbNow, compiler: SQLCompiler, **kw: Any) -> str:
    seconds = compiler.process(element.clauses, **kw)
    return (
        "(statement_timestamp() AT TIME ZONE 'UTC' "
        f"+ make_interval(secs => CAST({seconds} AS DOUBLE PRECISION)))"
    )


@compiles(DbNow, "sqlite")
def _db_now_sqlite(element: DbNow, compiler: SQLCompiler, **kw: Any) -> str:
    # Milliseconds, padded to the microsecond text SQLAlchemy stores, so that
    # stored times and this compare as strings.
    seconds = compiler.process(element.clauses, **kw)
    return f"strftime('%Y-%m-%d %H:%M:%f000', 'now', CAST({seconds} AS TEXT) || ' seconds')"


@compiles(DbNow)
def _db_now_other(element: DbNow, compiler: SQLCompiler, **kw: Any) -> str:
    raise CompileError(f"db_now() is not defined for {compiler.dialect.name}")


def _none() -> None:
    return None


# SQLite only autoincrements INTEGER PRIMARY KEY; PostgreSQL gets BIGINT.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


#: why a subscription ends with its session: its last rows are still told,
#: where a subscription ended any other way hears nothing more
SESSION_ENDED = "session ended"


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
    # `subscribe <id> stall=30m`: this thread's stall threshold in minutes; 0 is
    # off, NULL is the bot's STALL_AFTER_MINUTES.
    stall_after_minutes: Mapped[int | None] = mapped_column(Integer(), nullable=True)
    # `subscribe <id> target=2000`: the step this thread waits for (the card's ETA).
    target_step: Mapped[int | None] = mapped_column(BigInteger(), nullable=True)
    # `subscribe <id> broadcast=errors|ends|all|off`: which thread replies are
    # also shown in the channel; NULL is what BROADCAST_ERRORS says.
    broadcast: Mapped[str | None] = mapped_column(String(8), nullable=True)
    # `subscribe <id> dm=creator`: the session's creator is DMed its errors,
    # stalls and idle resources; NULL is no DM.
    dm: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # `subscribe <id> chart=off`: no final chart in the thread when the session ends.
    chart_on_end: Mapped[bool] = mapped_column(Boolean(), default=True, server_default=true())

    @property
    def filter_set(self) -> frozenset[str]:
        return frozenset(f for f in self.filters.split(",") if f)


class WatchedSession(Base):
    """What the poller last saw of one session, and who holds its lease."""

    __tablename__ = "watched_sessions"
    __table_args__ = (Index("ix_watched_sessions_due", "active", "next_poll_at"),)

    session_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    active: Mapped[bool] = mapped_column(Boolean(), default=True)
    last_status: Mapped[str] = mapped_column(Text())
    # The session as last seen, trimmed (`SessionSnapshot.of`); always written, None
    # only when what is stored no longer reads as a session (see `PydanticJSON`).
    snapshot: Mapped[SessionSnapshot | None] = mapped_column(
        PydanticJSON(SessionSnapshot, missing=_none), nullable=False
    )
    # What checkpoints (and registrations) were already seen, to tell only new ones.
    checkpoint_keys: Mapped[list[str] | None] = mapped_column(JSON(), nullable=True)
    transition_seq: Mapped[int] = mapped_column(Integer(), default=0)
    next_poll_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow)
    last_polled_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    consecutive_failures: Mapped[int] = mapped_column(Integer(), default=0)
    last_failure: Mapped[str | None] = mapped_column(Text(), nullable=True)
    # When Together first answered "not found" in the current run of 404s: the
    # session is told gone only once that is confirmed (NOT_FOUND_CONFIRM_SECONDS).
    not_found_since: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    # Polls in a row whose result could not be stored; at MAX_WRITE_FAILURES the
    # session is set aside (inactive, `last_failure` says why) with one alert.
    write_failures: Mapped[int] = mapped_column(Integer(), default=0, server_default="0")
    # The watches' view of the session (`bot.training.poll_progress.PollProgress`): the step
    # as the polls saw it, the spend watch's last read, the subscribed-idle watch's mark.
    # NULL: never polled (a command shows no watch section for it).
    progress: Mapped[PollProgress | None] = mapped_column(
        PydanticJSON(PollProgress, missing=_none), nullable=True
    )
    # A hash of the Together row the stored state was built from (`RawSession`): a
    # poll whose row hashes the same changes nothing but the progress. NULL: unknown.
    fingerprint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow, onupdate=utcnow)


class AlertSent(Base):
    """An on-call alert already sent (or an error that was history when the watch began).

    The outbox row of an alert is pruned after `OUTBOX_RETENTION_DAYS`, but a
    session stays in ERROR for good; this memory is kept as long as the org-wide
    watch still lists the error (`last_seen_at`), so on-call is paged once."""

    __tablename__ = "alerts_sent"

    key: Mapped[str] = mapped_column(String(400), primary_key=True)
    session_id: Mapped[str | None] = mapped_column(Text(), nullable=True)
    alerted: Mapped[bool] = mapped_column(Boolean(), default=True)
    sent_at: Mapped[datetime] = mapped_column(DateTime())
    last_seen_at: Mapped[datetime] = mapped_column(DateTime())


class AlertAck(Base):
    """Who took an on-call alert (its outbox row) and when: the first click's,
    so a second person is told who has it; an acknowledged alert is not paged
    again. No foreign key: the outbox row may be pruned before this one."""

    __tablename__ = "alert_acks"

    outbox_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    channel_id: Mapped[str] = mapped_column(String(32))
    user_id: Mapped[str] = mapped_column(String(32))
    acked_at: Mapped[datetime] = mapped_column(DateTime())


class Incident(Base):
    """Operator incidents (Together key rejected, Together unreachable): one alert each."""

    __tablename__ = "incidents"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    opened_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    alerted_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
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


class ReplicaSpend(Base):
    """What one replica spent on Together in the last minute, as it last reported it
    (`bot.jobs.spend_exchange`): the request budget is the whole deployment's, so each
    replica's poller takes the others' spend off it too. `updated_at` is the
    database's clock; a row not updated for a while is a replica gone and is pruned."""

    __tablename__ = "replica_spend"

    owner: Mapped[str] = mapped_column(String(200), primary_key=True)
    # requests a minute, every consumer's (the poller's included) and every one's but the poller's
    requests: Mapped[int] = mapped_column(Integer(), default=0)
    others: Mapped[int] = mapped_column(Integer(), default=0)
    updated_at: Mapped[datetime] = mapped_column(DateTime())


class TogetherGrant(Base):
    """Together requests the request budget granted, by tier, stamped by the
    database's clock (`bot.store.queries.together_grants`): the deployment's
    books, which every replica reads and writes under one lock before it sends.
    Rows older than two windows are deleted as new ones come."""

    __tablename__ = "together_grants"
    __table_args__ = (Index("ix_together_grants_at", "at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime())
    owner: Mapped[str] = mapped_column(String(200))
    tier: Mapped[str] = mapped_column(String(16))
    n: Mapped[int] = mapped_column(Integer())


class FollowRule(Base):
    """A channel's standing order to subscribe to sessions as they appear
    (`/rl-session follow`): whose (`selector`: "all" or a Slack user id), of which
    base model, with which thread filters. A rule whose channel the bot can no
    longer post in is switched off (`active` False, `ended_reason` says why) and
    kept, so its creator still sees it in App Home."""

    __tablename__ = "follow_rules"
    __table_args__ = (
        UniqueConstraint(
            "team_id", "channel_id", "selector", "model", name="uq_follow_rules_channel_rule"
        ),
        Index("ix_follow_rules_active", "active"),
        Index("ix_follow_rules_created_by", "created_by"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    team_id: Mapped[str] = mapped_column(String(32))
    channel_id: Mapped[str] = mapped_column(String(32))
    # "all", or the Slack user id whose sessions (through CREATED_BY_USER_MAP) it takes.
    selector: Mapped[str] = mapped_column(String(32))
    # The base model it keeps ("" for any): part of the unique key, so never NULL.
    model: Mapped[str] = mapped_column(String(200), default="", server_default="")
    # Comma-separated thread filters, as a subscription's.
    filters: Mapped[str] = mapped_column(String(64), default="status", server_default="status")
    stall_after_minutes: Mapped[int | None] = mapped_column(Integer(), nullable=True)
    # `existing`: also the sessions already live when the rule was made.
    existing: Mapped[bool] = mapped_column(Boolean(), default=False)
    created_by: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow)
    active: Mapped[bool] = mapped_column(Boolean(), default=True)
    ended_reason: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # Its channel was told it found more new sessions than a pass takes, and has
    # not caught up since: told once for the whole backlog, not at every pass.
    cap_told: Mapped[bool] = mapped_column(Boolean(), default=False, server_default=false())

    @property
    def filter_set(self) -> frozenset[str]:
        return frozenset(f for f in self.filters.split(",") if f)


class FollowClaim(Base):
    """A session a channel's follow rules took: one row per (channel, session),
    inserted before the subscription, so a session is subscribed once per channel
    whichever replica or rule finds it, and one the channel unsubscribed from is
    never taken again."""

    __tablename__ = "follow_claims"

    team_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    channel_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    rule_id: Mapped[int | None] = mapped_column(BigInteger(), nullable=True)
    claimed_by: Mapped[str] = mapped_column(String(200))
    claimed_at: Mapped[datetime] = mapped_column(DateTime())
    # Its subscription failed for a passing reason this many times in a row ...
    attempts: Mapped[int] = mapped_column(Integer(), default=0, server_default="0")
    # ... and is tried again from then (None: settled, subscribed or given up).
    retry_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)


class PersonalAlerts(Base):
    """A person's App Home switch "Tell me about my sessions": DMs about the
    sessions they created (CREATED_BY_USER_MAP), with no channel needed."""

    __tablename__ = "personal_alerts"

    user_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    team_id: Mapped[str] = mapped_column(String(32))
    enabled: Mapped[bool] = mapped_column(Boolean(), default=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow)


class PersonalWatch(Base):
    """One person's session that their switch took: the poller watches it, and its
    errors, stalls, end and idle resource are told to them in a DM."""

    __tablename__ = "personal_watches"

    user_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime())
