"""A card whose redraw Slack keeps refusing (its own failure, for that one
message) backs off alone: the channel's other cards are redrawn meanwhile, since
a redraw draws what is stored when it is sent and needs no row before it. A
rate limit is the workspace's, so a redraw waiting out a `Retry-After` still
holds the channel's redraws back. A status change waiting to be retried still
comes before everything after it. On the queue's own statements against both
databases (no process)."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.outbox.contract.payloads import Kind
from bot.outbox.contract.rows import OutboxRow, State, Thread, status_row, watch_row
from bot.outbox.queue import claim_due, insert_outbox
from bot.outbox.table import OutboxMessage
from bot.store.tables import db_now
from bot.training.poll_progress import CardView
from bot.training.sessions import TrainingSession
from bot.training.transitions import Transition
from tests.support.store_rows import add_subscription

Maker = async_sessionmaker[AsyncSession]
SID = "123e4567-e89b-12d3-a456-4266141740"
SESSION = TrainingSession.model_validate(
    {"id": SID + "00", "status": "TRAINING_SESSION_STATUS_RUNNING"}
)


async def _threads(maker: Maker, n: int) -> list[Thread]:
    async with maker() as db, db.begin():
        subs = [await add_subscription(db, f"{SID}{i:02d}", channel_id="C1") for i in range(n)]
        return [Thread(s.id, s.session_id, s.channel_id, s.root_ts) for s in subs]


def _redraw(thread: Thread) -> OutboxRow:
    return watch_row(thread, key="k", session=SESSION, view=CardView())


async def _insert(maker: Maker, rows: list[OutboxRow]) -> None:
    async with maker() as db, db.begin():
        await insert_outbox(db, rows)


async def _claim(maker: Maker) -> list[OutboxMessage]:
    async with maker() as db, db.begin():
        return await claim_due(db, owner="r1", limit=10, lease_seconds=30, channel_gap=0.0)


async def _refused(maker: Maker, row: OutboxMessage, error: str) -> None:
    """As delivery stores a refusal it will retry in five minutes."""
    async with maker() as db, db.begin():
        await db.execute(
            update(OutboxMessage)
            .where(OutboxMessage.id == row.id)
            .values(
                last_error=error,
                next_attempt_at=db_now(300.0),
                lease_owner=None,
                lease_until=None,
            )
        )


async def test_a_redraw_slack_keeps_refusing_does_not_hold_the_other_cards(maker: Maker) -> None:
    a, b, c = await _threads(maker, 3)
    await _insert(maker, [_redraw(a)])
    [first] = await _claim(maker)
    await _refused(maker, first, "internal_error")
    await _insert(maker, [_redraw(b), _redraw(c)])
    [second] = await _claim(maker)
    assert second.subscription_id == b.subscription_id
    await _refused(maker, second, "message_too_long")
    [third] = await _claim(maker)
    assert third.subscription_id == c.subscription_id


async def test_a_rate_limited_redraw_still_holds_the_channels_redraws(maker: Maker) -> None:
    a, b = await _threads(maker, 2)
    await _insert(maker, [_redraw(a)])
    [first] = await _claim(maker)
    await _refused(maker, first, "ratelimited")
    await _insert(maker, [_redraw(b)])
    assert await _claim(maker) == []


async def test_a_status_change_backing_off_still_goes_first(maker: Maker) -> None:
    a, b = await _threads(maker, 2)
    change = Transition(
        old_status="TRAINING_SESSION_STATUS_RUNNING",
        new_status="TRAINING_SESSION_STATUS_STOPPING",
        ended=False,
    )
    await _insert(maker, [status_row(a, seq=1, transition=change, snapshot=None, told=True)])
    [status] = await _claim(maker)
    assert status.kind is Kind.TRANSITION and status.state is State.PENDING
    await _refused(maker, status, "internal_error")
    await _insert(maker, [_redraw(b)])
    assert await _claim(maker) == []  # the card waits for the news before it
