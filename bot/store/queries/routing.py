"""Where a subscription's news goes besides its thread: `broadcast=` (which
replies Slack also shows in the channel) and `dm=creator` (the session's
creator hears its errors, stalls and idle resources in a DM)."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.tables import Subscription

#: `subscriptions.dm` when the creator is DMed
DM_CREATOR = "creator"


async def broadcast_modes(db: AsyncSession, subscription_ids: Collection[int]) -> dict[int, str]:
    """The `broadcast=` of those of these subscriptions that chose one."""
    if not subscription_ids:
        return {}
    rows = await db.execute(
        select(Subscription.id, Subscription.broadcast).where(
            Subscription.id.in_(sorted(subscription_ids)), Subscription.broadcast.is_not(None)
        )
    )
    return {r.id: str(r.broadcast) for r in rows}


async def creator_dm_subscriptions(db: AsyncSession, subscription_ids: Collection[int]) -> set[int]:
    """Those of these subscriptions that DM the session's creator. Ended ones
    count too: an idle resource is told to the threads of sessions that ended."""
    if not subscription_ids:
        return set()
    rows = await db.execute(
        select(Subscription.id).where(
            Subscription.id.in_(sorted(subscription_ids)),
            Subscription.dm == DM_CREATOR,
        )
    )
    return {r.id for r in rows}
