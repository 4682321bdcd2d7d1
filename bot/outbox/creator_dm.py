"""The creator DMs a write of thread rows owes (`subscribe … dm=creator`): the
rows' subscriptions that chose it are read in one query, and the rule of what
is DMed is `contract.rows.creator_dm_rows`. Written in the same transaction as
the thread rows, so a DM is owed exactly when its thread's news is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from bot.outbox.contract.rows import OutboxRow, creator_dm_rows
from bot.store.queries.routing import creator_dm_subscriptions


async def creator_dms(
    db: AsyncSession, rows: Sequence[OutboxRow], *, user_map: Mapping[str, str]
) -> list[OutboxRow]:
    """The DM rows these thread rows owe; none without a CREATED_BY_USER_MAP."""
    if not user_map:
        return []
    ids = {r.subscription_id for r in rows if r.subscription_id is not None}
    chosen = await creator_dm_subscriptions(db, ids)
    return creator_dm_rows(rows, chosen, user_map) if chosen else []
