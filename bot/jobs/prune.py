"""Outbox pruning: finished outbox rows, and alerts the error watch no longer
lists, are dropped past OUTBOX_RETENTION_DAYS so the tables stay small."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import delete

from bot.outbox.queue import OutboxMessage, State
from bot.runtime import Runtime
from bot.store.tables import AlertSent, db_now


async def prune_outbox(rt: Runtime) -> int:
    """Drop finished outbox rows past their retention; pending rows are never dropped.

    Remembered alerts go only once the error watch has not listed their error
    for as long: a session still in ERROR keeps its alert remembered."""
    # The database's clock, as the rows' own times are.
    cutoff = db_now(-timedelta(days=rt.settings.outbox_retention_days).total_seconds())
    async with rt.sessionmaker() as db, db.begin():
        result = await db.execute(
            delete(OutboxMessage)
            .where(OutboxMessage.state != State.PENDING, OutboxMessage.created_at < cutoff)
            .execution_options(synchronize_session=False)
        )
        await db.execute(
            delete(AlertSent)
            .where(AlertSent.last_seen_at < cutoff)
            .execution_options(synchronize_session=False)
        )
    return int(getattr(result, "rowcount", 0) or 0)
