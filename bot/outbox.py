"""The notification outbox: written with the state that caused it, claimed by
whichever replica gets there first, sent at most one message per channel per
`CHANNEL_MIN_INTERVAL_SECONDS`, in order.

Every time here is the database's (`db_now`): a claim, the lease it takes, the
fence that renews it just before a send, and the schedule of a retry. A
replica whose clock is off by more than a lease therefore neither steals a
live lease nor holds on to a dead one.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from sqlalchemy import CursorResult, Insert, exists, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from bot.storage import AlertSent, OutboxMessage, db_now

# Dedupe keys are unique-indexed; a PostgreSQL btree entry has a size limit, and
# their parts can be API text of any length (error codes, listed session ids).
MAX_KEY_LENGTH = 200


def bounded_key(*parts: str) -> str:
    """`a:b:c`, or, when that is long, its first part and a hash of the whole."""
    key = ":".join(parts)
    if len(key) <= MAX_KEY_LENGTH:
        return key
    return f"{parts[0]}:sha256:{hashlib.sha256(key.encode('utf-8', 'replace')).hexdigest()}"


def _insert(db: AsyncSession) -> Any:
    dialect = db.get_bind().dialect.name
    module = postgresql if dialect == "postgresql" else sqlite
    # The Core table, not the ORM entity: an ORM bulk insert leaves out None values,
    # so rows with a None in another column (on-call and operator rows have no
    # subscription or thread) split one executemany into a statement per run of rows.
    return module.insert(OutboxMessage.__table__)


async def insert_outbox(db: AsyncSession, rows: list[dict[str, Any]]) -> None:
    """Insert rows, ignoring any whose dedupe key is already there (one statement)."""
    if not rows:
        return
    for row in rows:
        row.setdefault("state", "pending")
        row.setdefault("attempts", 0)
    stmt: Insert = (
        _insert(db)
        .values(next_attempt_at=db_now(), created_at=db_now())
        .on_conflict_do_nothing(index_elements=["dedupe_key"])
    )
    await db.execute(stmt, rows)


async def unalerted(
    db: AsyncSession, rows: list[dict[str, Any]], *, now: datetime
) -> list[dict[str, Any]]:
    """The on-call rows among `rows` not alerted before, now remembered as alerted.

    Written in the caller's transaction with the outbox rows themselves, and
    kept past the outbox's pruning, so an error that stays an error is paged once."""
    if not rows:
        return []
    keys = {str(r["dedupe_key"]): r for r in rows}
    seen = set(
        (await db.execute(select(AlertSent.key).where(AlertSent.key.in_(list(keys))))).scalars()
    )
    fresh = [r for k, r in keys.items() if k not in seen]
    await remember_alerts(db, fresh, now=now, alerted=True)
    return fresh


async def remember_alerts(
    db: AsyncSession, rows: list[dict[str, Any]], *, now: datetime, alerted: bool
) -> None:
    """Remember on-call rows' keys (`alerted=False`: errors that were history)."""
    if not rows:
        return
    dialect = db.get_bind().dialect.name
    module = postgresql if dialect == "postgresql" else sqlite
    await db.execute(
        module.insert(AlertSent).on_conflict_do_nothing(index_elements=["key"]),
        [
            {
                "key": str(r["dedupe_key"]),
                "session_id": r.get("session_id"),
                "alerted": alerted,
                "sent_at": now,
                "last_seen_at": now,
            }
            for r in rows
        ],
    )


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
        .where(older.state == "pending")
        .group_by(older.channel_id)
        .scalar_subquery()
    )
    stmt = (
        select(OutboxMessage)
        .where(
            OutboxMessage.state == "pending",
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
            OutboxMessage.state == "pending",
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
                .where(OutboxMessage.state == "pending")
            )
        ).scalar_one()
    )
