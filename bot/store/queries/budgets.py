"""Spend budgets: the queries the `budget` command and the budget watch run on
`budgets`, and the subscribed sessions' spend reads a budget is judged on."""

from __future__ import annotations

from collections.abc import Collection
from datetime import date
from typing import Any, NamedTuple

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.channel_lock import lock_channel_caps
from bot.store.engine import rows_touched, upsert
from bot.store.rule_tables import EVERY_SESSION, Budget
from bot.store.tables import Subscription, WatchedSession, utcnow
from bot.training.poll_progress import PollProgress

#: the most budgets one channel may hold (its daily one included)
MAX_BUDGETS = 50


class BudgetAt(NamedTuple):
    """A budget with the subscription it is told in (a daily one: the channel's
    first active one among the sessions judged, for the thread link only)."""

    budget: Budget
    subscription_id: int
    session_id: str
    root_ts: str


async def set_budget(
    db: AsyncSession,
    *,
    team_id: str,
    channel_id: str,
    session_id: str,
    amount: float,
    daily: bool,
    created_by: str,
) -> bool:
    """Set (or replace) a budget; a replaced one starts untold, and is told anew
    (its warnings are told once by its id and when it was set). False, and
    nothing set, when the channel holds MAX_BUDGETS others already."""
    await lock_channel_caps(db, team_id=team_id, channel_id=channel_id)
    held = await db.execute(
        select(func.count())
        .select_from(Budget)
        .where(
            Budget.team_id == team_id,
            Budget.channel_id == channel_id,
            Budget.session_id != session_id,
        )
    )
    if held.scalar_one() >= MAX_BUDGETS:
        return False
    values = {
        "team_id": team_id,
        "channel_id": channel_id,
        "session_id": session_id,
        "amount": amount,
        "daily": daily,
        "told_level": 0,
        "day": None,
        "baseline": None,
        "created_by": created_by,
        "created_at": utcnow(),
    }
    await db.execute(upsert(db, Budget, values, key=["team_id", "channel_id", "session_id"]))
    return True


async def remove_budget(
    db: AsyncSession, *, team_id: str, channel_id: str, session_id: str
) -> bool:
    result = await db.execute(
        delete(Budget).where(
            Budget.team_id == team_id,
            Budget.channel_id == channel_id,
            Budget.session_id == session_id,
        )
    )
    return rows_touched(result) > 0


async def channel_budgets(db: AsyncSession, *, team_id: str, channel_id: str) -> list[Budget]:
    rows = await db.execute(
        select(Budget)
        .where(Budget.team_id == team_id, Budget.channel_id == channel_id)
        .order_by(Budget.id)
    )
    return list(rows.scalars())


async def budgets_reaching(db: AsyncSession, session_ids: Collection[str]) -> list[BudgetAt]:
    """Session budgets on `session_ids` and the daily budgets of the channels
    subscribed to them, each with one active subscription: one statement."""
    if not session_ids:
        return []
    rows = await db.execute(
        select(Budget, Subscription.id, Subscription.session_id, Subscription.root_ts)
        .join(
            Subscription,
            (Subscription.team_id == Budget.team_id)
            & (Subscription.channel_id == Budget.channel_id)
            & ((Budget.session_id == Subscription.session_id) | (Budget.daily.is_(True))),
        )
        .where(Subscription.session_id.in_(list(session_ids)), Subscription.active.is_(True))
        .order_by(Budget.id, Subscription.id)
    )
    out: dict[int, BudgetAt] = {}
    for budget, sub_id, sid, root_ts in rows.all():
        out.setdefault(budget.id, BudgetAt(budget, sub_id, sid, root_ts))
    return list(out.values())


async def channel_progress(
    db: AsyncSession, *, team_id: str, channel_id: str
) -> dict[str, PollProgress]:
    """The watch state of every session the channel is subscribed to (a daily budget's sum)."""
    rows = await db.execute(
        select(WatchedSession.session_id, WatchedSession.progress)
        .join(Subscription, Subscription.session_id == WatchedSession.session_id)
        .where(
            Subscription.team_id == team_id,
            Subscription.channel_id == channel_id,
            Subscription.active.is_(True),
        )
    )
    return {sid: progress or PollProgress() for sid, progress in rows.all()}


async def keep_budget_state(
    db: AsyncSession,
    budget_id: int,
    *,
    told_level: int,
    day: date | None = None,
    baseline: dict[str, Any] | None = None,
) -> None:
    values: dict[str, Any] = {"told_level": told_level}
    if day is not None:
        values |= {"day": day.isoformat(), "baseline": baseline}
    await db.execute(update(Budget).where(Budget.id == budget_id).values(**values))


async def card_budget(
    db: AsyncSession, *, team_id: str, channel_id: str, session_id: str
) -> Budget | None:
    """The session's own budget in this channel (the card's "spent ≈ $X of $Y")."""
    row = await db.execute(
        select(Budget).where(
            Budget.team_id == team_id,
            Budget.channel_id == channel_id,
            Budget.session_id == session_id,
            Budget.session_id != EVERY_SESSION,
        )
    )
    return row.scalar_one_or_none()
