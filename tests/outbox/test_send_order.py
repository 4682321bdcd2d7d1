"""The outbox's send order, a card's merged redraws and the pace of routine
redraws, on the queue's own statements against both databases (no process)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.outbox.contract.payloads import Kind
from bot.outbox.contract.rows import (
    OutboxRow,
    State,
    Thread,
    card_now_row,
    checkpoints_row,
    oncall_row,
    status_row,
    watch_row,
)
from bot.outbox.order import routine_allowed
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


async def _threads(maker: Maker, n: int, channel: str = "C1") -> list[Thread]:
    async with maker() as db, db.begin():
        subs = [await add_subscription(db, f"{SID}{i:02d}", channel_id=channel) for i in range(n)]
        return [Thread(s.id, s.session_id, s.channel_id, s.root_ts) for s in subs]


def _redraw(thread: Thread, n: int) -> OutboxRow:
    return watch_row(thread, key=f"{n}:k", session=SESSION, view=CardView())


def _status(thread: Thread, seq: int) -> OutboxRow:
    transition = Transition(
        old_status="TRAINING_SESSION_STATUS_RUNNING",
        new_status="TRAINING_SESSION_STATUS_STOPPING",
        ended=False,
    )
    return status_row(thread, seq=seq, transition=transition, snapshot=None, told=True)


async def _insert(maker: Maker, rows: list[OutboxRow]) -> None:
    async with maker() as db, db.begin():
        await insert_outbox(db, rows)


async def _claim(maker: Maker, owner: str = "r1", **kw: Any) -> list[OutboxMessage]:
    async with maker() as db, db.begin():
        return await claim_due(db, owner=owner, limit=500, lease_seconds=30, channel_gap=0.0, **kw)


async def _finish(maker: Maker, rows: list[OutboxMessage]) -> None:
    async with maker() as db, db.begin():
        await db.execute(
            update(OutboxMessage)
            .where(OutboxMessage.id.in_([r.id for r in rows]))
            .values(state=State.SENT, sent_at=db_now(), lease_owner=None, lease_until=None)
        )


async def _pending(maker: Maker) -> list[tuple[int | None, Kind]]:
    async with maker() as db:
        found = await db.execute(
            select(OutboxMessage.subscription_id, OutboxMessage.kind)
            .where(OutboxMessage.state == State.PENDING)
            .order_by(OutboxMessage.id)
        )
        return [(r[0], Kind(r[1])) for r in found]


async def test_a_status_change_goes_before_the_redraws_queued_before_it(maker: Maker) -> None:
    threads = await _threads(maker, 30)
    await _insert(maker, [_redraw(t, 1) for t in threads])
    await _insert(maker, [_status(threads[-1], 1)])
    [first] = await _claim(maker)  # one row per channel at a time
    assert first.kind is Kind.TRANSITION
    await _finish(maker, [first])
    [second] = await _claim(maker)
    assert second.kind is Kind.CARD and second.subscription_id == threads[0].subscription_id


async def test_alerts_go_between_status_changes_and_redraws_in_write_order(maker: Maker) -> None:
    [thread] = await _threads(maker, 1)
    await _insert(maker, [_redraw(thread, 1)])
    await _insert(maker, [checkpoints_row(thread, seq=1, items=[], snapshot=None)])
    await _insert(maker, [card_now_row(thread, key="budget")])
    await _insert(maker, [_status(thread, 1), _status(thread, 2)])
    await _insert(maker, [oncall_row("C1", SESSION, seq=1, thread_channel=None, thread_ts=None)])
    told: list[tuple[Kind, str]] = []
    while rows := await _claim(maker):
        [row] = rows
        told.append((row.kind, row.dedupe_key))
        await _finish(maker, rows)
    assert [kind for kind, _ in told] == [
        Kind.TRANSITION,
        Kind.TRANSITION,
        Kind.ONCALL,
        Kind.CHECKPOINTS,
        Kind.CARD_NOW,
    ]
    assert told[0][1].endswith(":1") and told[1][1].endswith(":2")  # same class: in order
    # the routine redraw was merged into the person's: one redraw draws both
    assert await _pending(maker) == []


async def test_a_channel_sends_one_row_at_a_time_whatever_its_class(maker: Maker) -> None:
    threads = await _threads(maker, 2)
    await _insert(maker, [_redraw(threads[0], 1)])
    [redraw] = await _claim(maker)
    await _insert(maker, [_status(threads[1], 1)])
    # the redraw is still being sent, by r1: no other replica sends in the channel
    # meanwhile (r1's own next pass would find the redraw left over, and take it again)
    assert await _claim(maker, owner="r2") == []
    assert await _claim(maker, owner="r3") == []
    await _finish(maker, [redraw])
    [status] = await _claim(maker, owner="r2")
    assert status.kind is Kind.TRANSITION


async def test_a_cards_redraws_merge_into_one_waiting_row(maker: Maker) -> None:
    threads = await _threads(maker, 3)
    for step in range(40):  # every step a new view of every card
        await _insert(maker, [_redraw(t, step) for t in threads])
    assert len(await _pending(maker)) == 3
    # one being sent keeps its row; the next change waits in a second one
    taken = await _claim(maker)
    assert len(taken) == 1
    await _insert(maker, [_redraw(t, 99) for t in threads])
    await _insert(maker, [_redraw(t, 100) for t in threads])
    assert len(await _pending(maker)) == 4  # bounded by the cards, not the steps


async def test_a_persons_change_makes_the_waiting_redraw_its_own(maker: Maker) -> None:
    [thread] = await _threads(maker, 1)
    await _insert(maker, [_redraw(thread, 1)])
    await _insert(maker, [card_now_row(thread, key="mute")])
    assert await _pending(maker) == [(thread.subscription_id, Kind.CARD_NOW)]
    await _insert(maker, [_redraw(thread, 2)])  # a routine one finds it waiting
    assert await _pending(maker) == [(thread.subscription_id, Kind.CARD_NOW)]


async def test_routine_redraws_are_paced_and_a_persons_are_not(maker: Maker) -> None:
    spread = [(await _threads(maker, 1, channel=f"C{i}"))[0] for i in range(12)]
    await _insert(maker, [_redraw(t, 1) for t in spread])  # 12 cards in 12 channels
    first = await _claim(maker, routine_per_minute=12)
    assert len(first) == 2  # a sixth of the minute's 12 in any ten seconds
    assert await _claim(maker, routine_per_minute=12) == []  # those two are under way
    await _finish(maker, first)
    assert await _claim(maker, routine_per_minute=12) == []  # sent within ten seconds
    await _insert(maker, [card_now_row(t, key="budget") for t in spread[5:8]])
    now = await _claim(maker, routine_per_minute=12)
    assert [r.kind for r in now] == [Kind.CARD_NOW] * 3  # not held back


async def test_the_pace_counts_every_card_update_of_the_last_minute(maker: Maker) -> None:
    threads = await _threads(maker, 3)
    await _insert(maker, [_status(t, 1) for t in threads])
    async with maker() as db, db.begin():
        assert await routine_allowed(db, per_minute=40) == 6
        await db.execute(update(OutboxMessage).values(state=State.SENT, sent_at=db_now(-30.0)))
        assert await routine_allowed(db, per_minute=40) == 6  # ten seconds are free again
        assert await routine_allowed(db, per_minute=4) == 1
        assert await routine_allowed(db, per_minute=3) == 0  # the minute's three are spent
