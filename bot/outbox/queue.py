"""The notification outbox's queue: the queries that write, claim and fence its
rows (the table is `bot.outbox.table`).

A row is written with the state that caused it, claimed by whichever replica
gets there first, and sent at most one message per channel per
`CHANNEL_MIN_INTERVAL_SECONDS`, in the order of its class (`bot.outbox.order`),
a card's redraws merged into one. What a row says is its contract
(`bot.outbox.contract`).

Every time here is the database's (`db_now`): a claim, the lease it takes, the
fence that renews it just before a send, and the schedule of a retry. A
replica whose clock is off by more than a lease therefore neither steals a
live lease nor holds on to a dead one.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from sqlalchemy import ColumnElement, exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from bot.outbox.contract.payloads import Kind
from bot.outbox.contract.rows import OutboxRow, State
from bot.outbox.order import (
    REDRAWS,
    holds_place,
    posts,
    posts_or_posted,
    routine_allowed,
    send_class,
)
from bot.outbox.table import OutboxMessage
from bot.store.engine import insert_ignoring, rows_touched
from bot.store.leases import HANDED_BACK, claimable, leased_to
from bot.store.leases import hand_back as hand_back_leases
from bot.store.leases import renew as renew_leases
from bot.store.tables import (
    SESSION_ENDED,
    Subscription,
    db_now,
)

# -- writing ------------------------------------------------------------------------------------


async def insert_outbox(db: AsyncSession, rows: Sequence[OutboxRow]) -> None:
    """Insert rows, ignoring any whose dedupe key is already there (one statement).

    A card's redraws are merged: a redraw row is written only when its card has no
    redraw waiting (pending, and not taken by a sender), since the waiting one draws
    whatever is stored when it is sent. A redraw for a change a person made turns a
    waiting routine one into its own kind, so it is not paced. A card thus never has
    more than two redraw rows pending: one being sent, one waiting."""
    if not rows:
        return
    plain = [r for r in rows if r.kind not in REDRAWS or r.subscription_id is None]
    if plain:
        await _insert(db, plain)
    redraws = [r for r in rows if r.kind in REDRAWS and r.subscription_id is not None]
    if redraws:
        await _insert(db, await _unmerged(db, redraws))


async def _insert(db: AsyncSession, rows: Sequence[OutboxRow]) -> None:
    if not rows:
        return
    stmt = insert_ignoring(db, OutboxMessage.__table__, conflict=["dedupe_key"]).values(
        next_attempt_at=db_now(), created_at=db_now()
    )
    await db.execute(stmt, [row.values() for row in rows])


async def _unmerged(db: AsyncSession, rows: Sequence[OutboxRow]) -> list[OutboxRow]:
    """The redraw rows whose card has none waiting, one per card (a person's change
    first). A waiting row is locked, so a sender cannot take it with the state from
    before this transaction; a waiting routine row a person's change finds becomes
    that change's."""
    wanted: dict[int, OutboxRow] = {}
    for row in sorted(rows, key=lambda r: r.kind != Kind.CARD_NOW):
        wanted.setdefault(row.subscription_id or 0, row)
    waiting = (
        await db.execute(
            select(OutboxMessage.id, OutboxMessage.subscription_id, OutboxMessage.kind)
            .where(
                OutboxMessage.subscription_id.in_(sorted(wanted)),
                OutboxMessage.kind.in_(REDRAWS),
                OutboxMessage.state == State.PENDING,
                claimable(OutboxMessage),
            )
            .with_for_update()
        )
    ).all()
    promote: list[int] = []
    for row_id, subscription_id, kind in waiting:
        found = wanted.pop(subscription_id or 0, None)
        if found is not None and found.kind == Kind.CARD_NOW and kind != Kind.CARD_NOW:
            promote.append(row_id)
    if promote:
        await db.execute(
            update(OutboxMessage)
            .where(OutboxMessage.id.in_(promote))
            .values(kind=Kind.CARD_NOW, next_attempt_at=db_now())
            .execution_options(synchronize_session=False)
        )
    return list(wanted.values())


# -- claiming -----------------------------------------------------------------------------------


#: the transaction lock that takes delivery's claims one at a time on PostgreSQL
_CLAIM_LOCK = 0x726C626F74_01


@cache
def _claim_aliases() -> tuple[Any, Any]:
    """The outbox table twice more, for a channel's other rows and its last post:
    made once, since building an alias costs more than the idle claim's query."""
    return aliased(OutboxMessage), aliased(OutboxMessage)


async def claim_due(
    db: AsyncSession,
    *,
    owner: str,
    limit: int,
    lease_seconds: float,
    channel_gap: float,
    routine_per_minute: float | None = None,
) -> list[OutboxMessage]:
    """Lease the first pending row of each channel that may speak now.

    A channel's first row is its oldest of the first class that has one
    (`bot.outbox.order`: status and errors, alerts, redraws, routine redraws), and
    only it is eligible, and only while no other row of its channel is being sent:
    a channel's messages of a class go out in order and never two at once, even
    across replicas. A channel posted to less than `channel_gap` seconds ago waits
    for its next post (a redraw posts nothing, and waits for nothing). Routine
    redraws are taken only as far as `routine_per_minute` allows now
    (`order.routine_allowed`; None: no pace). A row leased to a replica whose
    heartbeat stopped is taken at once. A row still leased to `owner` itself is
    left from an earlier pass whose database went away before it could store the
    row's result or hand it back: it is taken again at once, since one replica's
    passes never overlap (a post that went out is found by its dedupe key). The
    lease is only a claim: each row is fenced (`fence`) again just before it is
    sent.

    The rows come back as they were before this claim took them (`lease_owner`,
    `lease_until`): what a takeover from another replica is measured from.
    """
    if db.get_bind().dialect.name == "postgresql":
        # Claims one after another: a row written meanwhile cannot make two replicas
        # each see its channel idle and send two of its rows at once.
        await db.execute(select(func.pg_advisory_xact_lock(_CLAIM_LOCK)))
    other, recent = _claim_aliases()

    def free(entity: Any) -> ColumnElement[bool]:
        # nobody's (or a gone replica's), or this replica's own left from an earlier pass
        return or_(
            claimable(entity, me=owner, lease_seconds=lease_seconds), entity.lease_owner == owner
        )

    mine = send_class(OutboxMessage)
    # Each channel's first pending row (`order.holds_place`: news backing off keeps
    # its place, a card's redraw refused alone does not), ranked once over the
    # pending rows rather than compared pair by pair, so the claim's cost grows with
    # the rows, not with their square.
    ranked = (
        select(
            OutboxMessage.id.label("id"),
            func.row_number()
            .over(partition_by=OutboxMessage.channel_id, order_by=(mine, OutboxMessage.id))
            .label("place"),
        )
        .where(OutboxMessage.state == State.PENDING, holds_place(OutboxMessage))
        .subquery()
    )
    busy = select(other.channel_id).where(other.state == State.PENDING, ~free(other))
    stmt = (
        select(OutboxMessage)
        .where(
            OutboxMessage.id.in_(select(ranked.c.id).where(ranked.c.place == 1)),
            OutboxMessage.state == State.PENDING,
            OutboxMessage.next_attempt_at <= db_now(),
            free(OutboxMessage),
            OutboxMessage.channel_id.not_in(busy),
            or_(
                ~posts(OutboxMessage),
                ~exists().where(
                    recent.channel_id == OutboxMessage.channel_id,
                    recent.sent_at > db_now(-channel_gap),
                    posts_or_posted(recent),
                ),
            ),
        )
        .order_by(mine, OutboxMessage.id)
        .limit(limit)
        .with_for_update(skip_locked=True, of=OutboxMessage)
    )
    rows = list((await db.execute(stmt)).scalars())
    routine = [r for r in rows if r.kind == Kind.CARD and r.sent_ts is None]
    if routine and routine_per_minute is not None:
        allowed = await routine_allowed(db, per_minute=routine_per_minute)
        held = {r.id for r in routine[allowed:]}
        rows = [r for r in rows if r.id not in held]
    if rows:
        await db.execute(
            update(OutboxMessage)
            .where(OutboxMessage.id.in_([r.id for r in rows]))
            .values(**leased_to(owner, lease_seconds), attempts=OutboxMessage.attempts + 1)
            .execution_options(synchronize_session=False)
        )
        for r in rows:  # detached copies: the caller's edits must not flush back
            db.expunge(r)
            r.attempts += 1
    return rows


async def renew(db: AsyncSession, ids: Sequence[int], *, owner: str, lease_seconds: float) -> int:
    """Extend the leases this replica still holds on pending rows it has claimed
    and not finished (a batch waiting its turn behind a slow Slack): the
    heartbeat of delivery's work. Like the fence, it never revives a lease that
    ran out or was taken over. Returns how many were renewed."""
    if not ids:
        return 0
    return await renew_leases(
        db, OutboxMessage, *_pending(ids), owner=owner, lease_seconds=lease_seconds
    )


async def hand_back(db: AsyncSession, ids: Sequence[int], *, owner: str) -> int:
    """Give up leases on pending rows this replica could not fence (the database
    was away), so the next claim takes them at once, not when they run out."""
    return await hand_back_leases(db, OutboxMessage, *_pending(ids), owner=owner)


def _pending(ids: Sequence[int]) -> tuple[ColumnElement[bool], ...]:
    """Which of these rows are still pending."""
    return (OutboxMessage.id.in_(list(ids)), OutboxMessage.state == State.PENDING)


def _deliverable() -> ColumnElement[bool]:
    """A row with no subscription, or whose subscription is active or ended with
    its session."""
    return or_(
        OutboxMessage.subscription_id.is_(None),
        exists().where(
            Subscription.id == OutboxMessage.subscription_id,
            or_(Subscription.active.is_(True), Subscription.ended_reason == SESSION_ENDED),
        ),
    )


async def fence(db: AsyncSession, row_id: int, *, owner: str, lease_seconds: float) -> bool:
    """Renew this replica's lease on a row just before sending it.

    True only if the row is still pending, still leased to `owner` by the
    database's clock, and its subscription has not ended: then nobody can take it
    for two renewals (`heartbeats.unrenewed_after`), so its post lands first. False
    means: do not send. A row whose subscription was ended (a poll that read it
    just before an unsubscribe wrote the row just after) is then cancelled, and
    a lease still held on a row no longer pending is handed back: an unsubscribe
    waits for those (`in_flight`)."""
    mine = (OutboxMessage.id == row_id, OutboxMessage.lease_owner == owner)
    result = await db.execute(
        update(OutboxMessage)
        .where(
            *mine,
            OutboxMessage.state == State.PENDING,
            OutboxMessage.lease_until > db_now(),
            _deliverable(),
        )
        .values(lease_until=db_now(lease_seconds))
        .execution_options(synchronize_session=False)
    )
    if rows_touched(result) == 1:
        return True
    await db.execute(
        update(OutboxMessage)
        .where(*mine, OutboxMessage.state == State.PENDING, ~_deliverable())
        .values(state=State.CANCELLED)
        .execution_options(synchronize_session=False)
    )
    await db.execute(
        update(OutboxMessage)
        .where(*mine, OutboxMessage.state != State.PENDING)
        .values(**HANDED_BACK)
        .execution_options(synchronize_session=False)
    )
    return False


async def in_flight(db: AsyncSession, subscription_id: int) -> int:
    """How many of a subscription's rows a replica may be sending right now: leased,
    by the database's clock. Delivery hands a lease back when it is done, even on
    a row cancelled meanwhile."""
    return int(
        (
            await db.execute(
                select(func.count())
                .select_from(OutboxMessage)
                .where(
                    OutboxMessage.subscription_id == subscription_id,
                    OutboxMessage.lease_owner.is_not(None),
                    OutboxMessage.lease_until > db_now(),
                )
            )
        ).scalar_one()
    )


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


async def cancel_owed(db: AsyncSession, subscription_ids: list[int]) -> None:
    """Cancel what ended subscriptions still owe (`bot.subscriptions.service`).

    A cancelled row keeps its lease: a replica may be posting it right now, and
    hands the lease back when done (`in_flight`)."""
    await db.execute(
        update(OutboxMessage)
        .where(
            OutboxMessage.subscription_id.in_(subscription_ids),
            OutboxMessage.state == State.PENDING,
        )
        .values(state=State.CANCELLED)
        .execution_options(synchronize_session=False)
    )
