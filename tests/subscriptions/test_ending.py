"""Ending subscriptions on a real database: the rows end with why, what they
still owe is cancelled (what was sent stays), and a session stops being polled
only when no other channel and no person's switch still follows it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.outbox.contract.payloads import Kind
from bot.outbox.contract.rows import State
from bot.outbox.table import OutboxMessage
from bot.store.tables import PersonalWatch, Subscription, WatchedSession
from bot.subscriptions.service import end_subscriptions
from tests.support.store_rows import add_subscription, add_watch

Maker = async_sessionmaker[AsyncSession]


def _owed(sub: Subscription, key: str, state: State) -> OutboxMessage:
    return OutboxMessage(
        dedupe_key=key,
        kind=Kind.TRANSITION,
        subscription_id=sub.id,
        session_id=sub.session_id,
        channel_id=sub.channel_id,
        payload={},
        state=state,
    )


async def test_ending_cancels_what_is_owed_and_stops_only_orphaned_sessions(maker: Maker) -> None:
    async with maker() as db, db.begin():
        for sid in ("shared", "alone", "personal"):
            await add_watch(db, sid, active=True)
        ended = await add_subscription(db, "shared")
        other_channel = await add_subscription(db, "shared", channel_id="C2")
        alone = await add_subscription(db, "alone")
        personal = await add_subscription(db, "personal")
        db.add(PersonalWatch(user_id="U9", session_id="personal", created_at=datetime(2026, 1, 1)))
        db.add_all(
            [
                _owed(ended, "pending", State.PENDING),
                _owed(ended, "sent", State.SENT),
                _owed(other_channel, "other", State.PENDING),
            ]
        )
        ids = [ended.id, alone.id, personal.id]
    async with maker() as db, db.begin():
        await end_subscriptions(db, ids, reason="unsubscribed by U1")
        await end_subscriptions(db, [], reason="nothing")
    async with maker() as db:
        subs = {s.id: s for s in (await db.scalars(select(Subscription))).all()}
        rows = {r.dedupe_key: r.state for r in (await db.scalars(select(OutboxMessage))).all()}
        watches = {w.session_id: w.active for w in (await db.scalars(select(WatchedSession)))}
    assert all(not subs[i].active and subs[i].ended_reason == "unsubscribed by U1" for i in ids)
    assert subs[other_channel.id].active and subs[other_channel.id].ended_at is None
    assert rows == {"pending": State.CANCELLED, "sent": State.SENT, "other": State.PENDING}
    assert watches == {"shared": True, "alone": False, "personal": True}
