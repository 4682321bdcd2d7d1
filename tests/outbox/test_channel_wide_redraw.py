"""A change a person makes for every session of a channel (`alert * kl > 8`, or
its removal) is shown on every card of the channel, since every card shows the
channel's `*` rules: one redraw owed per active card, paced with the routine ones
(a channel may follow hundreds), never one for another channel's cards. On the
store (both databases), as the command's own transaction writes it."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.outbox.contract.payloads import Kind
from bot.outbox.contract.rows import State
from bot.outbox.table import OutboxMessage
from bot.subscriptions.redraw import redraw_card
from tests.support.store_rows import CHANNEL, TEAM, add_subscription

Maker = async_sessionmaker[AsyncSession]
SID = "123e4567-e89b-12d3-a456-4266141740"


async def test_a_rule_on_every_session_owes_every_card_here_a_redraw(maker: Maker) -> None:
    async with maker() as db, db.begin():
        here = [await add_subscription(db, f"{SID}{i:02d}") for i in range(3)]
        await add_subscription(db, f"{SID}10", active=False)
        await add_subscription(db, f"{SID}11", channel_id="C2")
    async with maker() as db, db.begin():
        queued = await redraw_card(
            db, team_id=TEAM, channel_id=CHANNEL, session_id="*", what="alert"
        )
    assert queued
    async with maker() as db:
        found = (
            await db.execute(
                select(OutboxMessage.subscription_id, OutboxMessage.kind).where(
                    OutboxMessage.state == State.PENDING
                )
            )
        ).all()
    assert sorted(sub for sub, _ in found) == sorted(s.id for s in here)
    assert {Kind(kind) for _, kind in found} == {Kind.CARD}  # paced: a channel may follow many
