"""One transaction at a time for what a channel holds up to a cap (its rules, its
budgets): the count and the insert that follows it are then one step, so two
commands at once never store one past the cap."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

#: the first key of the transaction lock (the second: the channel's hash)
_CHANNEL_CAPS = 0x726C6263


async def lock_channel_caps(db: AsyncSession, *, team_id: str, channel_id: str) -> None:
    """Wait for, and hold to the end of this transaction, the channel's caps lock.
    PostgreSQL only: SQLite takes one writer at a time already."""
    if db.get_bind().dialect.name != "postgresql":
        return
    key = func.hashtext(f"{team_id}:{channel_id}")
    await db.execute(select(func.pg_advisory_xact_lock(_CHANNEL_CAPS, key)))
