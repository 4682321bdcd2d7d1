"""The queries that store what became of a row delivery sent, on a row that is
still the sender's: fenced on its lease, so a row another replica took over is
left to it and a row cancelled meanwhile stays cancelled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select, update

from bot.outbox.contract.rows import State
from bot.outbox.table import OutboxMessage
from bot.store.engine import rows_touched
from bot.store.leases import HANDED_BACK
from bot.store.leases import hand_back as hand_back_leases
from bot.store.session import Db
from bot.store.tables import db_now


async def mark_posted(db: Db, row_id: int, mark: str, *, owner: str) -> bool:
    """Store that Slack has the row's message (`mark`) on a row still leased to
    `owner`; True when the row is still pending (its root card still owed)."""
    await db.execute(
        update(OutboxMessage)
        .where(OutboxMessage.id == row_id, OutboxMessage.lease_owner == owner)
        .values(sent_ts=mark, sent_at=db_now())
        .execution_options(synchronize_session=False)
    )
    state = (
        await db.execute(
            select(OutboxMessage.state).where(
                OutboxMessage.id == row_id, OutboxMessage.lease_owner == owner
            )
        )
    ).scalar_one_or_none()
    return state == State.PENDING


async def store_result(db: Db, row_id: int, values: Mapping[str, Any], *, owner: str) -> bool:
    """Write `values` and hand back the lease, only on a row still pending and
    leased to `owner`; True when it was written."""
    result = await db.execute(
        update(OutboxMessage)
        .where(
            OutboxMessage.id == row_id,
            OutboxMessage.state == State.PENDING,
            OutboxMessage.lease_owner == owner,
        )
        .values(dict(values) | HANDED_BACK)
        .execution_options(synchronize_session=False)
    )
    return rows_touched(result) == 1


async def hand_back_row(db: Db, row_id: int, *, owner: str) -> None:
    """Hand back `owner`'s lease on a row whatever its state (one cancelled while
    in flight): an unsubscribe waits for it."""
    await hand_back_leases(db, OutboxMessage, OutboxMessage.id == row_id, owner=owner)


async def hand_back_rows(db: Db, *, owner: str) -> int:
    """Hand back every row lease held in `owner`'s name (a replica that stops)."""
    return await hand_back_leases(db, OutboxMessage, owner=owner)
