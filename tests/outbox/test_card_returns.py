"""A card that comes back to what it showed before (12 steps/min, then 13, then
12 again) is redrawn again: the third change's redraw is not taken for the first
one's, already sent, so the card does not stay at 13. On the queue's own
statements against both databases (no process)."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.outbox.contract.rows import State, Thread, watch_row
from bot.outbox.queue import claim_due, insert_outbox
from bot.outbox.table import OutboxMessage
from bot.store.tables import db_now
from bot.training.poll_progress import CardView
from bot.training.sessions import TrainingSession
from tests.support.store_rows import add_subscription

Maker = async_sessionmaker[AsyncSession]
SID = "123e4567-e89b-12d3-a456-426614174000"
SESSION = TrainingSession.model_validate({"id": SID, "status": "TRAINING_SESSION_STATUS_RUNNING"})


async def test_a_card_shown_again_as_before_is_redrawn_again(maker: Maker) -> None:
    async with maker() as db, db.begin():
        sub = await add_subscription(db, SID, channel_id="C1")
    thread = Thread(sub.id, sub.session_id, sub.channel_id, sub.root_ts)
    for shown in ("12 steps/min", "13 steps/min", "12 steps/min"):
        async with maker() as db, db.begin():
            await insert_outbox(
                db, [watch_row(thread, key=shown, session=SESSION, view=CardView())]
            )
        async with maker() as db, db.begin():
            rows = await claim_due(db, owner="r1", limit=10, lease_seconds=30, channel_gap=0.0)
            assert len(rows) == 1, f"no redraw owed after the card came to {shown}"
            await db.execute(
                update(OutboxMessage)
                .where(OutboxMessage.id == rows[0].id)
                .values(state=State.SENT, sent_at=db_now(), lease_owner=None, lease_until=None)
            )
    async with maker() as db:
        sent = (await db.execute(select(OutboxMessage.id))).scalars().all()
    assert len(sent) == 3
