"""The notification outbox: its table, the contract of its rows, and the
queries that write, claim and fence them.

A row is written with the state that caused it, claimed by whichever replica
gets there first, and sent at most one message per channel per
`CHANNEL_MIN_INTERVAL_SECONDS`, in order.

The contract: a row's `kind` (`Kind`) says what it tells, and its payload is
the pydantic class of that kind (`Payload`, discriminated by `kind`). Rows are
built only here (`status_row`, `checkpoints_row`, `oncall_row`,
`operator_row`, `digest_row`), read back only as their payload class
(`OutboxMessage.typed_payload`), and the payload is stored without its kind
(the column holds it), as before the contract existed, so old rows still load.

Every time here is the database's (`db_now`): a claim, the lease it takes, the
fence that renews it just before a send, and the schedule of a retry. A
replica whose clock is off by more than a lease therefore neither steals a
live lease nor holds on to a dead one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, NamedTuple, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from sqlalchemy import (
    JSON,
    CursorResult,
    DateTime,
    Enum,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    exists,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, aliased, mapped_column

from bot.store.engine import insert_ignoring
from bot.store.tables import AlertSent, Base, BigId, Subscription, WatchedSession, db_now, utcnow
from bot.training.shapes import TrainingSession
from bot.training.snapshots import trimmed_snapshot
from bot.training.transitions import Transition

# Dedupe keys are unique-indexed; a PostgreSQL btree entry has a size limit, and
# their parts can be API text of any length (error codes, listed session ids).
MAX_KEY_LENGTH = 200


class Kind(StrEnum):
    """What a row tells, and so how delivery sends it."""

    TRANSITION = "transition"  # a status change, told in the subscription's thread
    ROOT = "root"  # a status change not told (filtered, muted): the root card only
    CHECKPOINTS = "checkpoints"  # new checkpoints or registrations, in the thread
    ONCALL = "oncall"  # an error occurrence, to the on-call channel
    OPERATOR = "operator"  # an incident for whoever runs the bot
    DIGEST = "digest"  # a channel's daily digest
    PROGRESS = "progress"  # stalled, resumed or slow to start (in the thread, or on-call)
    IDLE = "idle"  # a READY model resource with no active session (on-call and threads)


class State(StrEnum):
    PENDING = "pending"
    SENT = "sent"
    DEAD = "dead"  # Slack refused it for good
    CANCELLED = "cancelled"  # its subscription ended first


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


# -- payloads: one class per kind --------------------------------------------------------------


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True)


class _StatusChange(_Payload):
    old_status: str
    new_status: str
    ended: bool = False  # the subscription ends with this message
    gone: bool = False  # Together no longer knows the session
    # The session as last seen (a trimmed snapshot); None only in very old rows.
    session: dict[str, Any] | None = None


class TransitionPayload(_StatusChange):
    kind: Literal[Kind.TRANSITION] = Kind.TRANSITION


class RootPayload(_StatusChange):
    kind: Literal[Kind.ROOT] = Kind.ROOT
    #: the watch's view of the session (`watched_sessions.progress`) for the card
    watch: dict[str, Any] | None = None


class CheckpointsPayload(_Payload):
    kind: Literal[Kind.CHECKPOINTS] = Kind.CHECKPOINTS
    # `transitions.checkpoint_news` items, as `rendering.checkpoint_message` reads them.
    items: list[dict[str, Any]] = []
    more: int = 0  # new checkpoints beyond the items (a burst): only counted
    session: dict[str, Any] | None = None


class OncallPayload(_Payload):
    kind: Literal[Kind.ONCALL] = Kind.ONCALL
    session: dict[str, Any] | None = None
    # The first subscription's thread, linked from the alert.
    thread_channel: str | None = None
    thread_ts: str | None = None


class OperatorPayload(_Payload):
    kind: Literal[Kind.OPERATOR] = Kind.OPERATOR
    title: str = "rl-bot"
    detail: str = ""


class DigestSession(BaseModel):
    session_id: str
    display_name: str | None
    status: str


class DigestChange(BaseModel):
    name: str
    old_status: str
    new_status: str


class DigestPayload(_Payload):
    """What a digest says, rendered when it is sent like every other kind.
    `message` is the pre-rendered message of rows queued before that."""

    kind: Literal[Kind.DIGEST] = Kind.DIGEST
    day: str = ""
    sessions: list[DigestSession] = []
    changes: list[DigestChange] = []
    message: dict[str, Any] | None = None


class ProgressPayload(_Payload):
    """A stall, its end, or a slow start (`bot.alerts.stall`), told once per
    episode: the dedupe key names the episode."""

    kind: Literal[Kind.PROGRESS] = Kind.PROGRESS
    event: Literal["stalled", "resumed", "creating"]
    step: int | None = None
    new_step: int | None = None  # resumed: the step it moved to
    since: datetime  # stalled/resumed: when the frozen step was first seen; creating: start
    seconds: float = 0.0  # how long it has been stalled / creating
    rate: float | None = None  # steps per minute the bot measured, for the card
    idles_out_at: datetime | None = None
    #: `idles_out_at` is the bot's estimate, not the resource's `expires_at`
    #: (rows queued before the spend watch could say were all estimates)
    idles_out_estimated: bool = True
    session: dict[str, Any] | None = None
    # On-call's page for a stall: mention, and link the first subscription's thread.
    page: bool = False
    thread_channel: str | None = None
    thread_ts: str | None = None


class IdlePayload(_Payload):
    """A model resource that is ready, and billing, with no CREATING or RUNNING
    session on it (`bot.alerts.idle`); told once per idle episode."""

    kind: Literal[Kind.IDLE] = Kind.IDLE
    resource: dict[str, Any]  # the ModelResource as Together sent it
    idle_since: datetime
    currency: str | None = None
    price_per_hour: float | None = None
    # Trimmed snapshots of the sessions that used it (the newest few).
    sessions: list[dict[str, Any]] = []
    page: bool = False  # on-call's copy: with ONCALL_MENTION


Payload = Annotated[
    TransitionPayload
    | RootPayload
    | CheckpointsPayload
    | OncallPayload
    | OperatorPayload
    | DigestPayload
    | ProgressPayload
    | IdlePayload,
    Field(discriminator="kind"),
]
_PAYLOAD: TypeAdapter[Payload] = TypeAdapter(Payload)


def read_payload(kind: str, payload: dict[str, Any]) -> Payload:
    """A stored payload as its class; ValueError for a kind that is none of ours."""
    return _PAYLOAD.validate_python({**payload, "kind": kind})


# -- the table ----------------------------------------------------------------------------------


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
    sent_ts: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow)

    @property
    def typed_payload(self) -> Payload:
        return read_payload(self.kind, self.payload)


# -- rows: every builder ------------------------------------------------------------------------


@dataclass(frozen=True)
class OutboxRow:
    """A row to insert: where it goes, its dedupe key, and what it says."""

    dedupe_key: str
    channel_id: str
    payload: Payload
    subscription_id: int | None = None
    session_id: str | None = None
    thread_ts: str | None = None

    @property
    def kind(self) -> Kind:
        return self.payload.kind

    def values(self) -> dict[str, Any]:
        """The table's columns (the payload without its kind: the column holds it)."""
        return {
            "dedupe_key": self.dedupe_key,
            "kind": self.kind,
            "subscription_id": self.subscription_id,
            "session_id": self.session_id,
            "channel_id": self.channel_id,
            "thread_ts": self.thread_ts,
            "payload": self.payload.model_dump(mode="json", exclude={"kind"}),
            "state": State.PENDING,
            "attempts": 0,
        }


def bounded_key(*parts: str) -> str:
    """`a:b:c`, or, when that is long, its first part and a hash of the whole."""
    key = ":".join(parts)
    if len(key) <= MAX_KEY_LENGTH:
        return key
    return f"{parts[0]}:sha256:{hashlib.sha256(key.encode('utf-8', 'replace')).hexdigest()}"


class Thread(NamedTuple):
    """A subscription's thread: where its rows go."""

    subscription_id: int
    session_id: str
    channel_id: str
    thread_ts: str


def status_row(
    thread: Thread,
    *,
    seq: int,
    transition: Transition,
    snapshot: dict[str, Any] | None,
    told: bool,
) -> OutboxRow:
    """A status change for one subscription: told in its thread, or (`told`
    False: filtered or muted) only shown on its root card."""
    fields: dict[str, Any] = {
        "old_status": transition.old_status,
        "new_status": transition.new_status,
        "ended": transition.ended,
        "gone": transition.gone,
        "session": snapshot,
    }
    payload = TransitionPayload(**fields) if told else RootPayload(**fields)
    return _thread_row(thread, f"transition:{thread.subscription_id}:{seq}", payload)


def watch_row(
    thread: Thread, *, key: str, session: TrainingSession, watch: dict[str, Any]
) -> OutboxRow:
    """A redraw of one subscription's root card with what the spend watch saw
    (resource, price, estimated spend), once per `key` of what it shows."""
    payload = RootPayload(
        old_status=session.status,
        new_status=session.status,
        session=trimmed_snapshot(session),
        watch=watch,
    )
    return _thread_row(thread, bounded_key("watch", str(thread.subscription_id), key), payload)


def checkpoints_row(
    thread: Thread,
    *,
    seq: int,
    items: list[dict[str, Any]],
    snapshot: dict[str, Any] | None,
    more: int = 0,
) -> OutboxRow:
    """The checkpoints that appeared in one poll, for one subscription's thread."""
    payload = CheckpointsPayload(items=items, more=more, session=snapshot)
    return _thread_row(thread, f"checkpoints:{thread.subscription_id}:{seq}", payload)


def progress_row(thread: Thread, payload: ProgressPayload) -> OutboxRow:
    """One stall, resume or slow start for one subscription's thread, once per episode."""
    key = bounded_key(payload.event, str(thread.subscription_id), payload.since.isoformat())
    return _thread_row(thread, key, payload)


def stall_page_row(channel: str, session_id: str, payload: ProgressPayload) -> OutboxRow:
    """On-call's page for one stall episode of a session (ONCALL_ON_STALL)."""
    return OutboxRow(
        dedupe_key=bounded_key("stall-page", session_id, payload.since.isoformat()),
        channel_id=channel,
        payload=payload,
        session_id=session_id,
    )


def idle_rows(
    payload: IdlePayload, *, oncall_channel: str | None, threads: Sequence[Thread]
) -> list[OutboxRow]:
    """One idle episode of a resource: on-call's alert and one per subscribed thread."""
    resource_id = str(payload.resource.get("id") or "")
    since = payload.idle_since.isoformat()
    rows = [
        _thread_row(
            thread, bounded_key("idle", str(thread.subscription_id), resource_id, since), payload
        )
        for thread in threads
    ]
    if oncall_channel:
        rows.append(
            OutboxRow(
                dedupe_key=bounded_key("idle-page", resource_id, since),
                channel_id=oncall_channel,
                payload=payload.model_copy(update={"page": True}),
            )
        )
    return rows


def _thread_row(thread: Thread, dedupe_key: str, payload: Payload) -> OutboxRow:
    return OutboxRow(
        dedupe_key=dedupe_key,
        channel_id=thread.channel_id,
        payload=payload,
        subscription_id=thread.subscription_id,
        session_id=thread.session_id,
        thread_ts=thread.thread_ts,
    )


def oncall_key(session: TrainingSession, seq: int | None) -> str:
    """An error occurrence's own identity, so the subscribed poller and the org-wide
    watch never both alert; bounded, since its parts are API text."""
    occurrence = session.error_key or (
        session.updated_at.isoformat() if session.updated_at else f"seq{seq}"
    )
    return bounded_key("oncall", session.id, occurrence)


def oncall_row(
    channel: str,
    session: TrainingSession,
    *,
    seq: int | None,
    thread_channel: str | None,
    thread_ts: str | None,
) -> OutboxRow:
    """The on-call alert for one error occurrence (see `oncall_key`)."""
    return OutboxRow(
        dedupe_key=oncall_key(session, seq),
        channel_id=channel,
        payload=OncallPayload(
            session=trimmed_snapshot(session), thread_channel=thread_channel, thread_ts=thread_ts
        ),
        session_id=session.id,
    )


def operator_row(channel: str, key: str, title: str, detail: str) -> OutboxRow:
    """An incident for whoever runs the bot, once per `key`."""
    return OutboxRow(
        dedupe_key=f"operator:{key}",
        channel_id=channel,
        payload=OperatorPayload(title=title, detail=detail),
    )


def digest_row(
    *,
    team_id: str,
    channel_id: str,
    day: str,
    sessions: list[DigestSession],
    changes: list[DigestChange],
) -> OutboxRow:
    """A channel's digest for one local day, once."""
    return OutboxRow(
        dedupe_key=f"digest:{team_id}:{channel_id}:{day}",
        channel_id=channel_id,
        payload=DigestPayload(day=day, sessions=sessions, changes=changes),
    )


# -- writing ------------------------------------------------------------------------------------


async def insert_outbox(db: AsyncSession, rows: Sequence[OutboxRow]) -> None:
    """Insert rows, ignoring any whose dedupe key is already there (one statement)."""
    if not rows:
        return
    stmt = insert_ignoring(db, OutboxMessage.__table__, conflict=["dedupe_key"]).values(
        next_attempt_at=db_now(), created_at=db_now()
    )
    await db.execute(stmt, [row.values() for row in rows])


class Alert(Protocol):
    """What `alerts_sent` keeps of an on-call alert."""

    @property
    def dedupe_key(self) -> str: ...

    @property
    def session_id(self) -> str | None: ...


A = TypeVar("A", bound=Alert)


async def unalerted(db: AsyncSession, alerts: Sequence[A], *, now: datetime) -> list[A]:
    """The alerts among `alerts` not alerted before, now remembered as alerted.

    Written in the caller's transaction with the outbox rows themselves, and
    kept past the outbox's pruning, so an error that stays an error is paged once."""
    if not alerts:
        return []
    keys = {a.dedupe_key: a for a in alerts}
    seen = set(
        (await db.execute(select(AlertSent.key).where(AlertSent.key.in_(list(keys))))).scalars()
    )
    fresh = [a for k, a in keys.items() if k not in seen]
    await remember_alerts(db, fresh, now=now, alerted=True)
    return fresh


async def remember_alerts(
    db: AsyncSession, alerts: Sequence[Alert], *, now: datetime, alerted: bool
) -> None:
    """Remember alerts' keys (`alerted=False`: errors that were history)."""
    if not alerts:
        return
    await db.execute(
        insert_ignoring(db, AlertSent, conflict=["key"]),
        [
            {
                "key": a.dedupe_key,
                "session_id": a.session_id,
                "alerted": alerted,
                "sent_at": now,
                "last_seen_at": now,
            }
            for a in alerts
        ],
    )


# -- claiming -----------------------------------------------------------------------------------


async def claim_due(
    db: AsyncSession, *, owner: str, limit: int, lease_seconds: float, channel_gap: float
) -> list[OutboxMessage]:
    """Lease the oldest pending row of each channel that may speak now.

    Only a channel's oldest pending row is eligible, so a channel's messages go
    out in order and never two at once, even across replicas; and a channel
    that was posted to less than `channel_gap` seconds ago waits. The lease is
    only a claim: each row is fenced (`fence`) again just before it is sent.
    """
    older = aliased(OutboxMessage)
    recent = aliased(OutboxMessage)
    heads = (
        select(func.min(older.id))
        .where(older.state == State.PENDING)
        .group_by(older.channel_id)
        .scalar_subquery()
    )
    stmt = (
        select(OutboxMessage)
        .where(
            OutboxMessage.state == State.PENDING,
            OutboxMessage.next_attempt_at <= db_now(),
            or_(OutboxMessage.lease_until.is_(None), OutboxMessage.lease_until < db_now()),
            OutboxMessage.id.in_(heads),
            ~exists().where(
                recent.channel_id == OutboxMessage.channel_id,
                recent.sent_at > db_now(-channel_gap),
            ),
        )
        .order_by(OutboxMessage.id)
        .limit(limit)
        .with_for_update(skip_locked=True, of=OutboxMessage)
    )
    rows = list((await db.execute(stmt)).scalars())
    if rows:
        await db.execute(
            update(OutboxMessage)
            .where(OutboxMessage.id.in_([r.id for r in rows]))
            .values(
                lease_owner=owner,
                lease_until=db_now(lease_seconds),
                attempts=OutboxMessage.attempts + 1,
            )
            .execution_options(synchronize_session=False)
        )
        for r in rows:  # detached copies: the caller's edits must not flush back
            db.expunge(r)
            r.attempts += 1
    return rows


async def fence(db: AsyncSession, row_id: int, *, owner: str, lease_seconds: float) -> bool:
    """Renew this replica's lease on a row just before sending it.

    True only if the row is still pending, still leased to `owner`, and the lease
    has not run out by the database's clock: then nobody else can have it for
    another `lease_seconds`. False means: do not send, someone else owns it now."""
    result = await db.execute(
        update(OutboxMessage)
        .where(
            OutboxMessage.id == row_id,
            OutboxMessage.lease_owner == owner,
            OutboxMessage.state == State.PENDING,
            OutboxMessage.lease_until > db_now(),
        )
        .values(lease_until=db_now(lease_seconds))
        .execution_options(synchronize_session=False)
    )
    return isinstance(result, CursorResult) and result.rowcount == 1


async def pending_count(db: AsyncSession) -> int:
    return int(
        (
            await db.execute(
                select(func.count())
                .select_from(OutboxMessage)
                .where(OutboxMessage.state == State.PENDING)
            )
        ).scalar_one()
    )


async def end_subscriptions(db: AsyncSession, ids: list[int], *, reason: str) -> None:
    """End subscriptions, drop what they still owe, and stop polling orphaned sessions."""
    if not ids:
        return
    now = utcnow()
    await db.execute(
        update(Subscription)
        .where(Subscription.id.in_(ids))
        .values(active=False, ended_at=now, ended_reason=reason[:200])
        .execution_options(synchronize_session=False)
    )
    await db.execute(
        update(OutboxMessage)
        .where(OutboxMessage.subscription_id.in_(ids), OutboxMessage.state == State.PENDING)
        .values(state=State.CANCELLED, lease_owner=None, lease_until=None)
        .execution_options(synchronize_session=False)
    )
    session_ids = select(Subscription.session_id).where(Subscription.id.in_(ids))
    still_watched = exists().where(
        Subscription.session_id == WatchedSession.session_id, Subscription.active.is_(True)
    )
    await db.execute(
        update(WatchedSession)
        .where(WatchedSession.session_id.in_(session_ids), ~still_watched)
        .values(active=False)
        .execution_options(synchronize_session=False)
    )
