"""The budget queries on a real database: set, replace and remove, what reaches
a session (its own budget and its channel's daily one, through an active
subscription), the watch state a daily budget sums, and what the card shows."""

from __future__ import annotations

from datetime import date

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.store.queries.budgets import (
    budgets_reaching,
    card_budget,
    channel_budgets,
    channel_progress,
    keep_budget_state,
    remove_budget,
    set_budget,
)
from bot.store.rule_tables import EVERY_SESSION, Budget
from tests.support.store_rows import CHANNEL, TEAM, add_subscription, add_watch

Maker = async_sessionmaker[AsyncSession]


async def _set(db: AsyncSession, session_id: str, amount: float, **over: object) -> None:
    values: dict[str, object] = {
        "team_id": TEAM,
        "channel_id": CHANNEL,
        "session_id": session_id,
        "amount": amount,
        "daily": session_id == EVERY_SESSION,
        "created_by": "U1",
    }
    await set_budget(db, **(values | over))  # type: ignore[arg-type]


async def test_a_replaced_budget_starts_untold_and_remove_says_whether_one_was_there(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        await _set(db, "s1", 10.0)
        await _set(db, "s2", 20.0)
        await _set(db, "s3", 30.0, channel_id="C2")
    async with maker() as db, db.begin():
        [first, _] = await channel_budgets(db, team_id=TEAM, channel_id=CHANNEL)
        await keep_budget_state(
            db, first.id, told_level=2, day=date(2026, 12, 1), baseline={"s1": 1.5}
        )
    async with maker() as db, db.begin():
        told = await db.get(Budget, first.id)
        assert told is not None
        assert (told.told_level, told.day, told.baseline) == (2, "2026-12-01", {"s1": 1.5})
        await _set(db, "s1", 15.0)
    async with maker() as db, db.begin():
        budgets = await channel_budgets(db, team_id=TEAM, channel_id=CHANNEL)
        assert [(b.session_id, b.amount, b.told_level, b.day, b.baseline) for b in budgets] == [
            ("s1", 15.0, 0, None, None),
            ("s2", 20.0, 0, None, None),
        ]
        assert await remove_budget(db, team_id=TEAM, channel_id=CHANNEL, session_id="s2")
        assert not await remove_budget(db, team_id=TEAM, channel_id=CHANNEL, session_id="s2")
    async with maker() as db:
        assert [
            b.session_id for b in await channel_budgets(db, team_id=TEAM, channel_id=CHANNEL)
        ] == ["s1"]
        assert [b.session_id for b in await channel_budgets(db, team_id=TEAM, channel_id="C2")] == [
            "s3"
        ]


async def test_keep_budget_state_without_a_day_changes_only_the_level(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await _set(db, EVERY_SESSION, 100.0)
        [daily] = await channel_budgets(db, team_id=TEAM, channel_id=CHANNEL)
        await keep_budget_state(db, daily.id, told_level=1, day=date(2026, 12, 1), baseline={})
        await keep_budget_state(db, daily.id, told_level=3)
    async with maker() as db:
        row = await db.get(Budget, daily.id)
    assert row is not None and (row.told_level, row.day, row.baseline) == (3, "2026-12-01", {})


async def test_budgets_reaching_a_session_come_through_an_active_subscription(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        first = await add_subscription(db, "s1")
        await add_subscription(db, "s2")
        await add_subscription(db, "s3", active=False)
        await add_subscription(db, "s1", channel_id="C2")
        await _set(db, "s1", 10.0)
        await _set(db, EVERY_SESSION, 100.0)
        await _set(db, "s3", 5.0)  # its subscription ended
        await _set(db, "s1", 7.0, channel_id="C3")  # no subscription there
    async with maker() as db:
        reaching = await budgets_reaching(db, ["s1", "s2", "s3"])
        assert await budgets_reaching(db, []) == []
    found = [
        (at.budget.session_id, at.budget.amount, at.session_id, at.subscription_id)
        for at in reaching
    ]
    # the daily budget is told once, in the channel's first active subscription
    assert found == [("s1", 10.0, "s1", first.id), (EVERY_SESSION, 100.0, "s1", first.id)]
    assert reaching[0].root_ts == first.root_ts


async def test_channel_progress_is_the_watch_state_of_the_channels_active_sessions(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        await add_watch(db, "s1", progress={"step": 3})
        await add_watch(db, "s2")
        await add_watch(db, "s3", progress={"step": 9})
        await add_subscription(db, "s1")
        await add_subscription(db, "s2")
        await add_subscription(db, "s3", active=False)
        await add_subscription(db, "s3", channel_id="C2")
    async with maker() as db:
        progress = await channel_progress(db, team_id=TEAM, channel_id=CHANNEL)
    assert set(progress) == {"s1", "s2"}
    assert (progress["s1"].step, progress["s2"].step) == (3, None)


async def test_the_card_shows_the_sessions_own_budget_in_this_channel_only(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        await _set(db, "s1", 10.0)
        await _set(db, EVERY_SESSION, 100.0)
        await _set(db, "s2", 20.0, channel_id="C2")
    async with maker() as db:
        own = await card_budget(db, team_id=TEAM, channel_id=CHANNEL, session_id="s1")
        assert own is not None and own.amount == 10.0
        assert await card_budget(db, team_id=TEAM, channel_id=CHANNEL, session_id="s2") is None
        # the daily budget is not a session's own
        assert (
            await card_budget(db, team_id=TEAM, channel_id=CHANNEL, session_id=EVERY_SESSION)
            is None
        )


async def test_a_removed_budgets_id_never_comes_back(maker: Maker) -> None:
    """Its warnings' dedupe keys rest on the id: a new budget given it would be
    told nothing."""
    async with maker() as db, db.begin():
        await _set(db, "s1", 10.0)
        [gone] = await channel_budgets(db, team_id=TEAM, channel_id=CHANNEL)
        assert await remove_budget(db, team_id=TEAM, channel_id=CHANNEL, session_id="s1")
    async with maker() as db, db.begin():
        await _set(db, "s2", 10.0)
        await _set(db, "s1", 10.0)
    async with maker() as db:
        ids = [b.id for b in await channel_budgets(db, team_id=TEAM, channel_id=CHANNEL)]
    assert len(ids) == 2 and min(ids) > gone.id, (gone.id, ids)


async def test_a_replaced_budget_is_set_anew(maker: Maker) -> None:
    """Its warnings are told again: what they are told by changes with it."""
    async with maker() as db, db.begin():
        await _set(db, "s1", 10.0)
        [first] = await channel_budgets(db, team_id=TEAM, channel_id=CHANNEL)
    async with maker() as db, db.begin():
        await _set(db, "s1", 10.0, created_by="U2")
    async with maker() as db:
        [again] = await channel_budgets(db, team_id=TEAM, channel_id=CHANNEL)
    assert again.created_by == "U2" and again.created_at > first.created_at
