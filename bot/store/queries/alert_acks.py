"""Who took an on-call alert (`alert_acks`): the first click wins, by the
database's clock, and every later click reads who has it."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.engine import insert_ignoring
from bot.store.tables import AlertAck, db_now


async def take_alert(
    db: AsyncSession, *, outbox_id: int, channel_id: str, user_id: str
) -> AlertAck:
    """Acknowledge the alert for `user_id` unless someone already did; the
    acknowledgement in force either way (two clicks at once: one wins)."""
    await db.execute(
        insert_ignoring(db, AlertAck, conflict=["outbox_id"]).values(
            outbox_id=outbox_id, channel_id=channel_id, user_id=user_id, acked_at=db_now()
        )
    )
    ack = await db.get(AlertAck, outbox_id, populate_existing=True)
    assert ack is not None  # inserted, or there before
    return ack


async def alert_ack(db: AsyncSession, outbox_id: int) -> AlertAck | None:
    return await db.get(AlertAck, outbox_id)


async def acknowledged(db: AsyncSession, outbox_ids: Collection[int]) -> set[int]:
    """Those of these alerts someone took."""
    if not outbox_ids:
        return set()
    rows = await db.execute(
        select(AlertAck.outbox_id).where(AlertAck.outbox_id.in_(sorted(outbox_ids)))
    )
    return {r.outbox_id for r in rows}
