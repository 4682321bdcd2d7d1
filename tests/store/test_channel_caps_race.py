"""A channel's caps hold when two people ask at once: with 49 budgets (or 19
rules), two `budget` (or `alert`) commands for new sessions in two replicas' or
two requests' transactions give one of them the 50th place and refuse the
other, never store 51. PostgreSQL (SQLite takes one writer at a time, and the
second transaction's write fails there rather than passes the cap)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.store.queries.budgets import MAX_BUDGETS, set_budget
from bot.store.queries.metric_rules import MAX_METRIC_RULES, add_rule
from bot.store.rule_tables import Budget, MetricRule
from tests.support.store_rows import CHANNEL, TEAM

Maker = async_sessionmaker[AsyncSession]
Add = Callable[[AsyncSession, int], Awaitable[bool]]


async def _budget(db: AsyncSession, i: int) -> bool:
    return await set_budget(
        db,
        team_id=TEAM,
        channel_id=CHANNEL,
        session_id=f"s{i:03d}",
        amount=10.0,
        daily=False,
        created_by="U1",
    )


async def _rule(db: AsyncSession, i: int) -> bool:
    return await add_rule(
        db,
        team_id=TEAM,
        channel_id=CHANNEL,
        session_id=f"s{i:03d}",
        metric="kl",
        op=">",
        threshold=8.0,
        hold_seconds=0,
        page=False,
        created_by="U1",
    )


@pytest.mark.parametrize(
    ("add", "cap", "table"), [(_budget, MAX_BUDGETS, Budget), (_rule, MAX_METRIC_RULES, MetricRule)]
)
async def test_two_at_once_never_pass_the_cap(
    maker: Maker, db_url: str, add: Add, cap: int, table: type
) -> None:
    if not db_url.startswith("postgresql"):
        pytest.skip("PostgreSQL runs the two transactions side by side")
    async with maker() as db, db.begin():
        for i in range(cap - 1):
            assert await add(db, i)
    async with maker() as first, maker() as second:
        await first.begin()
        assert await add(first, 900)  # the 50th (20th), not yet committed

        async def other() -> bool:
            async with second.begin():
                return await add(second, 901)

        racing = asyncio.create_task(other())
        await asyncio.sleep(0.5)  # the second counts while the first is open
        await first.commit()
        second_added = await racing
    async with maker() as db:
        held = (await db.execute(select(func.count()).select_from(table))).scalar_one()
    assert held == cap and not second_added
