"""The notification outbox: written with the state that caused it, claimed by
whichever replica gets there first, sent at most one message per channel per
`CHANNEL_MIN_INTERVAL_SECONDS`, in order.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import Insert, exists, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from bot.storage import OutboxMessage, utcnow


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
    now = utcnow()
    for row in rows:
        row.setdefault("state", "pending")
        row.setdefault("attempts", 0)
        row.setdefault("next_attempt_at", now)
        row.setdefault("created_at", now)
    stmt: Insert = _insert(db).on_conflict_do_nothing(index_elements=["dedupe_key"])
    await db.execute(stmt, rows)


async def claim_due(
    db: AsyncSession, *, owner: str, limit: int, lease_seconds: float, channel_gap: float
) -> list[OutboxMessage]:
    """Lease the oldest pending row of each channel that may speak now.

    Only a channel's oldest pending row is eligible, so a channel's messages go
    out in order and never two at once, even across replicas; and a channel
    that was posted to less than `channel_gap` seconds ago waits.
    """
    now = utcnow()
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
            OutboxMessage.next_attempt_at <= now,
            or_(OutboxMessage.lease_until.is_(None), OutboxMessage.lease_until < now),
            OutboxMessage.id.in_(heads),
            ~exists().where(
                recent.channel_id == OutboxMessage.channel_id,
                recent.sent_at > now - timedelta(seconds=channel_gap),
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
                lease_until=now + timedelta(seconds=lease_seconds),
                attempts=OutboxMessage.attempts + 1,
            )
            .execution_options(synchronize_session=False)
        )
        for r in rows:  # detached copies: the caller's edits must not flush back
            db.expunge(r)
            r.attempts += 1
    return rows


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
