"""The outbox rows the bot writes, and every builder of them.

Rows are built only here (`status_row`, `checkpoints_row`, `oncall_row`,
`operator_row`, `digest_row`, ...): each names where it goes (a subscription's
`Thread`, or a channel) and its dedupe key, which makes writing the same news
twice a no-op. A row is written PENDING; delivery moves it on (`State`).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from bot.outbox.contract.payloads import (
    CardPayload,
    ChartPayload,
    CheckpointsPayload,
    CreatorDmPayload,
    DigestChange,
    DigestPayload,
    DigestSession,
    DmPayload,
    IdlePayload,
    Kind,
    MetricPayload,
    OncallPayload,
    OperatorPayload,
    Payload,
    ProgressPayload,
    RepagePayload,
    RootPayload,
    TransitionPayload,
)
from bot.training.poll_progress import CardView
from bot.training.sessions import TrainingSession
from bot.training.snapshots import SessionSnapshot
from bot.training.status import Status, status_of
from bot.training.transitions import CheckpointNews, Transition

# Dedupe keys are unique-indexed; a PostgreSQL btree entry has a size limit, and
# their parts can be API text of any length (error codes, listed session ids).
MAX_KEY_LENGTH = 200


class State(StrEnum):
    """Where a row is in its delivery."""

    PENDING = "pending"
    SENT = "sent"
    DEAD = "dead"  # Slack refused it for good
    CANCELLED = "cancelled"  # its subscription ended first


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
    """`a:b:c`, or, when that is long (or holds a NUL, which PostgreSQL's text
    refuses), its first part and a hash of the whole."""
    key = ":".join(parts)
    if len(key) <= MAX_KEY_LENGTH and "\x00" not in key:
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
    snapshot: SessionSnapshot | None,
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


def watch_row(thread: Thread, *, key: str, session: TrainingSession, view: CardView) -> OutboxRow:
    """A routine redraw of one subscription's root card with what the watches saw
    (resource, price, estimated spend, steps/min); `key` names what it shows. Each
    change is its own row: a card that comes back to what it showed before (12
    steps/min, 13, then 12) owes a redraw again, and a card's waiting redraws are
    merged into one anyway (`bot.outbox.queue.insert_outbox`)."""
    payload = CardPayload(session=SessionSnapshot.of(session), watch=view)
    unique = uuid.uuid4().hex
    return _thread_row(
        thread, bounded_key("watch", str(thread.subscription_id), key, unique), payload
    )


def card_now_row(thread: Thread, *, key: str) -> OutboxRow:
    """A redraw of one subscription's root card for a change a person made (a budget,
    a rule, a mute, the thread's options): sent at once, not paced with the routine
    ones; `key` names the change."""
    payload = CardPayload(kind=Kind.CARD_NOW)
    return _thread_row(thread, bounded_key("card", str(thread.subscription_id), key), payload)


def card_row(thread: Thread, *, key: str) -> OutboxRow:
    """A redraw of one subscription's root card paced with the routine ones: a change
    a person made for every card of a channel (a rule on `*`), which may be hundreds
    of cards; `key` names the change."""
    payload = CardPayload(kind=Kind.CARD)
    return _thread_row(thread, bounded_key("card", str(thread.subscription_id), key), payload)


def checkpoints_row(
    thread: Thread,
    *,
    seq: int,
    items: list[CheckpointNews],
    snapshot: SessionSnapshot | None,
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
    resource_id = payload.resource.id
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


def dm_row(
    user_id: str,
    session_id: str | None,
    about: TransitionPayload | ProgressPayload | IdlePayload,
    *,
    occurrence: str,
) -> OutboxRow:
    """A person's DM about one of their sessions, once per (person, `occurrence`):
    the channel is the user id, which Slack takes as the app's DM with them."""
    return OutboxRow(
        dedupe_key=bounded_key("dm", user_id, occurrence),
        channel_id=user_id,
        payload=DmPayload(about=about),
        session_id=session_id,
    )


def chart_row(thread: Thread, payload: ChartPayload, *, episode: str = "") -> OutboxRow:
    """A chart for one subscription's thread: its final chart once, a stall's once
    per stall episode (`episode`: when the frozen step was first seen)."""
    key = bounded_key("chart", payload.reason, str(thread.subscription_id), episode)
    return _thread_row(thread, key, payload)


def metric_rows(
    payload: MetricPayload, *, threads: Sequence[Thread], oncall_channel: str | None
) -> list[OutboxRow]:
    """A metric gone NaN or infinite: told once in each thread, and on-call's page
    when `oncall_channel` is given (ONCALL_ON_METRIC)."""
    rows = [
        _thread_row(
            thread, bounded_key("metric", str(thread.subscription_id), payload.metric), payload
        )
        for thread in threads
    ]
    if oncall_channel and threads:
        first = threads[0]
        rows.append(
            OutboxRow(
                dedupe_key=bounded_key("metric-page", first.session_id, payload.metric),
                channel_id=oncall_channel,
                payload=payload.model_copy(
                    update={
                        "page": True,
                        "thread_channel": first.channel_id,
                        "thread_ts": first.thread_ts,
                    }
                ),
                session_id=first.session_id,
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
            session=SessionSnapshot.of(session), thread_channel=thread_channel, thread_ts=thread_ts
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


def creator_dm_rows(
    rows: Sequence[OutboxRow],
    dm_subscriptions: Collection[int],
    user_map: Mapping[str, str],
) -> list[OutboxRow]:
    """The DMs these thread rows owe the sessions' creators (`dm=creator`): an
    error (told in the thread or not: a thread's filter or mute is the
    channel's choice), a stall, an idle resource. The creator is the session's
    (the resource's, for an idle one) `created_by` through CREATED_BY_USER_MAP;
    an unmapped creator gets none. One DM per event and person, however many
    threads chose it: the key names the event, not the thread."""
    out: dict[str, OutboxRow] = {}
    for row in rows:
        if row.subscription_id not in dm_subscriptions:
            continue
        found = _dm_event(row.payload)
        if found is None:
            continue
        event, creator, identity = found
        user = user_map.get(creator)
        if not user:
            continue
        key = bounded_key("creator-dm", user, *identity)
        out.setdefault(
            key,
            OutboxRow(
                dedupe_key=key,
                channel_id=user,  # Slack posts to a user id in the app's DM with them
                payload=CreatorDmPayload(
                    event=event, thread_channel=row.channel_id, thread_ts=row.thread_ts
                ),
                session_id=row.session_id,
            ),
        )
    return list(out.values())


def _dm_event(
    payload: Payload,
) -> tuple[TransitionPayload | ProgressPayload | IdlePayload, str, tuple[str, ...]] | None:
    """What of a thread row is DMed: the event, its creator, and its identity."""
    if isinstance(payload, TransitionPayload | RootPayload):
        if status_of(payload.new_status) is not Status.ERROR or payload.session is None:
            return None
        session = payload.session
        event = TransitionPayload(
            old_status=payload.old_status,
            new_status=payload.new_status,
            ended=payload.ended,
            gone=payload.gone,
            session=payload.session,
        )
        return event, session.created_by or "", (oncall_key(session, None),)
    if isinstance(payload, ProgressPayload):
        if payload.event != "stalled" or payload.page or payload.session is None:
            return None
        stalled = ("stalled", payload.session.id, payload.since.isoformat())
        return payload, payload.session.created_by or "", stalled
    if isinstance(payload, IdlePayload) and not payload.page:
        creator = payload.resource.created_by or ""
        resource_id = payload.resource.id
        return payload, creator, ("idle", resource_id, payload.idle_since.isoformat())
    return None


def repage_row(
    channel: str, *, alert_id: int, thread_ts: str | None, minutes: float, what: str
) -> OutboxRow:
    """An unacknowledged on-call alert paged once more, in its thread (once per alert)."""
    return OutboxRow(
        dedupe_key=f"repage:{alert_id}",
        channel_id=channel,
        payload=RepagePayload(alert_id=alert_id, minutes=minutes, what=what),
        thread_ts=thread_ts,
    )
