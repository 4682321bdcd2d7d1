"""Retention of the per-session tables: what goes with a watched session once
nothing watches it, on both databases."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.jobs.prune import prune_watches
from bot.runtime import Runtime
from bot.settings.model import Settings
from bot.store.rule_tables import RuleStateRow
from tests.support.store_rows import add_watch

Maker = async_sessionmaker[AsyncSession]


async def test_where_a_rule_stood_on_a_session_goes_with_its_watch(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await add_watch(db, "kept")
        for rule_id, sid in ((1, "kept"), (1, "gone"), (2, "gone")):
            db.add(RuleStateRow(rule_id=rule_id, session_id=sid, since=None, fired=True))
    rt = cast(Runtime, SimpleNamespace(sessionmaker=maker, settings=Settings(_env_file=None)))
    await prune_watches(rt)
    async with maker() as db:
        left = (await db.execute(select(RuleStateRow.rule_id, RuleStateRow.session_id))).all()
    assert [tuple(r) for r in left] == [(1, "kept")]
