"""The personal switch's queries on a real database: who turned it on, the
sessions taken for each person (once, up to a limit), and who hears of each."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.store.queries.personal_alerts import (
    listeners,
    set_switch,
    switch_on,
    switched_on,
    take,
    untake,
)
from bot.store.tables import PersonalWatch

Maker = async_sessionmaker[AsyncSession]


async def test_the_switch_is_set_turned_off_and_listed_by_user(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await set_switch(db, team_id="T1", user_id="U2", enabled=True)
        await set_switch(db, team_id="T1", user_id="U1", enabled=True)
        await set_switch(db, team_id="T1", user_id="U3", enabled=True)
    async with maker() as db, db.begin():
        await set_switch(db, team_id="T1", user_id="U3", enabled=False)
    async with maker() as db:
        assert await switched_on(db) == ["U1", "U2"]
        assert await switch_on(db, user_id="U1")
        assert not await switch_on(db, user_id="U3")
        assert not await switch_on(db, user_id="U9")


async def test_take_gives_each_session_once_up_to_the_limit(maker: Maker) -> None:
    async with maker() as db, db.begin():
        assert await take(db, user_id="U1", session_ids=["a", "b", "a", "c"], limit=2) == ["a", "b"]
    async with maker() as db, db.begin():
        # a and b were taken before; c is new; another person takes a afresh
        assert await take(db, user_id="U1", session_ids=["a", "b", "c"], limit=5) == ["c"]
        assert await take(db, user_id="U2", session_ids=["a"], limit=5) == ["a"]
        assert await take(db, user_id="U1", session_ids=[], limit=5) == []
        assert await take(db, user_id="U1", session_ids=["d"], limit=0) == []


async def test_untake_gives_a_session_back_for_the_next_pass(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await take(db, user_id="U1", session_ids=["a", "b"], limit=5)
    async with maker() as db, db.begin():
        await untake(db, user_id="U1", session_id="a")
        await untake(db, user_id="U1", session_id="never-taken")
    async with maker() as db:
        left = (await db.scalars(select(PersonalWatch.session_id))).all()
    assert left == ["b"]
    async with maker() as db, db.begin():
        assert await take(db, user_id="U1", session_ids=["a", "b"], limit=5) == ["a"]


async def test_listeners_are_people_with_the_switch_on_who_took_the_session(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        for user in ("U1", "U2", "U3"):
            await set_switch(db, team_id="T1", user_id=user, enabled=user != "U3")
            await take(db, user_id=user, session_ids=["s1"], limit=5)
        await take(db, user_id="U1", session_ids=["s2"], limit=5)
        # taken, but never switched on
        await take(db, user_id="U4", session_ids=["s2"], limit=5)
    async with maker() as db:
        assert await listeners(db, ["s1", "s2", "s3"]) == {"s1": ["U1", "U2"], "s2": ["U1"]}
        assert await listeners(db, []) == {}
