"""What charts need of subscriptions: where a channel's chart of a session goes
(a thread's `chart=end|off` is written with its other options, `subscriptions`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.tables import Subscription


@dataclass(frozen=True)
class ChartThread:
    """The subscription a chart of a session goes to in one channel."""

    subscription_id: int
    root_ts: str
    stall_after_minutes: int | None


async def chart_thread(
    db: AsyncSession, *, team_id: str, channel_id: str, session_id: str
) -> ChartThread | None:
    """This channel's active subscription to the session, if any: its thread."""
    row = (
        await db.execute(
            select(Subscription.id, Subscription.root_ts, Subscription.stall_after_minutes).where(
                Subscription.team_id == team_id,
                Subscription.channel_id == channel_id,
                Subscription.session_id == session_id,
                Subscription.active.is_(True),
            )
        )
    ).first()
    if row is None:
        return None
    return ChartThread(row.id, row.root_ts, row.stall_after_minutes)
