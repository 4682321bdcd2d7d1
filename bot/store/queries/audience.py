"""Queries on who hears of a session: the active subscriptions a poll's events are
told to (with each channel's budget on the session), and the subscriptions a
session that ended ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Row, func, select, update

from bot.store.rule_tables import Budget
from bot.store.session import Db, WideRow
from bot.store.tables import SESSION_ENDED, Subscription, db_now


async def listening_subscriptions(db: Db, session_ids: Sequence[str]) -> Sequence[WideRow]:
    """The active subscriptions to these sessions, oldest first, each with what
    deciding its rows needs and its channel's budget on the session (`amount`)."""
    subs = await db.execute(
        select(
            Subscription.id,
            Subscription.session_id,
            Subscription.channel_id,
            Subscription.root_ts,
            Subscription.filters,
            Subscription.muted_until,
            Subscription.stall_after_minutes,
            Subscription.target_step,
            Subscription.chart_on_end,
            Budget.amount,
        )
        .outerjoin(
            Budget,
            (Budget.team_id == Subscription.team_id)
            & (Budget.channel_id == Subscription.channel_id)
            & (Budget.session_id == Subscription.session_id),
        )
        .where(Subscription.session_id.in_(list(session_ids)), Subscription.active.is_(True))
        .order_by(Subscription.id)
    )
    return subs.all()


async def end_with_sessions(db: Db, session_ids: Sequence[str], *, now: datetime) -> None:
    """End the active subscriptions of sessions that ended (`SESSION_ENDED`: their
    last rows are still delivered)."""
    await db.execute(
        update(Subscription)
        .where(Subscription.session_id.in_(list(session_ids)), Subscription.active.is_(True))
        .values(active=False, ended_at=now, ended_reason=SESSION_ENDED)
        .execution_options(synchronize_session=False)
    )


async def session_threads(db: Db, session_id: str) -> Sequence[Row[int, str, str]]:
    """The session's active subscriptions, the first subscribed first: each its
    `id`, `channel_id` and `root_ts` (the thread it is told in)."""
    subs = await db.execute(
        select(Subscription.id, Subscription.channel_id, Subscription.root_ts)
        .where(Subscription.session_id == session_id, Subscription.active.is_(True))
        .order_by(Subscription.id)
    )
    return subs.all()


async def active_subscription_count(db: Db) -> int:
    """How many subscriptions are active (a gauge)."""
    count = await db.execute(
        select(func.count()).select_from(Subscription).where(Subscription.active.is_(True))
    )
    return int(count.scalar_one())


async def muted_until(db: Db, subscription_id: int) -> datetime | None:
    """Until when the subscription is muted (None: not muted, or gone)."""
    found = await db.execute(
        select(Subscription.muted_until).where(Subscription.id == subscription_id)
    )
    return found.scalar_one_or_none()


async def muted_now(db: Db, subscription_id: int) -> bool:
    """Whether the subscription's thread is muted right now, by the database's clock."""
    found = await db.execute(
        select(Subscription.id).where(
            Subscription.id == subscription_id, Subscription.muted_until > db_now()
        )
    )
    return found.first() is not None
