"""The queries on the bot's small tables, on a real database: who took an
on-call alert, which workspaces refused the chart, a channel's digest time."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.store.chart_tables import ChartRefusal
from bot.store.queries.alert_acks import acknowledged, alert_ack, take_alert
from bot.store.queries.channel_settings import set_digest
from bot.store.queries.chart_refusals import remember_refusal
from bot.store.tables import ChannelSettings

Maker = async_sessionmaker[AsyncSession]
T0 = datetime(2026, 12, 1, 10, 0)


async def test_the_first_click_takes_the_alert_and_later_ones_read_who_has_it(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        first = await take_alert(db, outbox_id=7, channel_id="C1", user_id="U1")
        assert (first.outbox_id, first.user_id, first.channel_id) == (7, "U1", "C1")
    async with maker() as db, db.begin():
        second = await take_alert(db, outbox_id=7, channel_id="C1", user_id="U2")
        assert second.user_id == "U1"
        assert second.acked_at == first.acked_at
    async with maker() as db:
        stored = await alert_ack(db, 7)
        assert stored is not None and stored.user_id == "U1"
        assert await alert_ack(db, 8) is None


async def test_acknowledged_is_those_of_the_ids_asked_that_someone_took(maker: Maker) -> None:
    async with maker() as db, db.begin():
        for outbox_id in (1, 3, 5):
            await take_alert(db, outbox_id=outbox_id, channel_id="C1", user_id="U1")
    async with maker() as db:
        assert await acknowledged(db, {1, 2, 3}) == {1, 3}
        assert await acknowledged(db, []) == set()


async def test_the_first_chart_refusal_is_the_one_kept_and_long_values_are_cut(
    maker: Maker,
) -> None:
    long_team = "T" * 40
    async with maker() as db, db.begin():
        await remember_refusal(db, "T1", error="invalid_blocks", now=T0)
        await remember_refusal(db, long_team, error="e" * 100, now=T0)
    async with maker() as db, db.begin():
        await remember_refusal(db, "T1", error="later", now=datetime(2026, 12, 2))
    async with maker() as db:
        rows = {r.team_id: r for r in (await db.scalars(select(ChartRefusal))).all()}
    assert set(rows) == {"T1", "T" * 32}
    assert (rows["T1"].error, rows["T1"].refused_at) == ("invalid_blocks", T0)
    assert rows["T" * 32].error == "e" * 64


async def test_set_digest_creates_changes_and_clears_one_channels_time(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await set_digest(db=db, team_id="T1", channel_id="C1", user_id="U1", at="09:00", tz="UTC")
        await set_digest(
            db=db, team_id="T1", channel_id="C2", user_id="U1", at="18:30", tz="Europe/Paris"
        )
    async with maker() as db, db.begin():
        await set_digest(
            db=db, team_id="T1", channel_id="C1", user_id="U2", at=None, tz="Asia/Tokyo"
        )
    async with maker() as db:
        one = await db.get(ChannelSettings, ("T1", "C1"))
        two = await db.get(ChannelSettings, ("T1", "C2"))
    assert one is not None and two is not None
    assert (one.digest_time, one.digest_tz, one.updated_by) == (None, "Asia/Tokyo", "U2")
    assert (two.digest_time, two.digest_tz, two.updated_by) == ("18:30", "Europe/Paris", "U1")
