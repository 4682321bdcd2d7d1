"""Writing a batch apart on a real database: one bad row costs only itself, a
fatal error or a batch where every row fails is raised, and the number of
transactions stays near 2*log2(n) for one bad row among n."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.store.tables import AlertAck, utcnow
from bot.store.write_apart import write_apart

Maker = async_sessionmaker[AsyncSession]


def _writer(maker: Maker, calls: list[list[int]]) -> Callable[[Sequence[int]], Awaitable[None]]:
    """Write each id as an acknowledgement; an id below 0 has no user (NOT NULL fails)."""

    async def write(ids: Sequence[int]) -> None:
        calls.append(list(ids))
        async with maker() as db, db.begin():
            for i in ids:
                db.add(
                    AlertAck(
                        outbox_id=abs(i),
                        channel_id="C1",
                        user_id=None if i < 0 else "U1",
                        acked_at=utcnow(),
                    )
                )

    return write


async def _stored(maker: Maker) -> list[int]:
    async with maker() as db:
        return sorted((await db.scalars(select(AlertAck.outbox_id))).all())


async def test_one_bad_row_is_set_aside_and_the_rest_are_written(
    maker: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[list[int]] = []
    items = [1, 2, 3, 4, 5, 6, -7, 8]
    with caplog.at_level(logging.WARNING, logger="bot.store.write_apart"):
        failed = await write_apart(
            items, _writer(maker, calls), fatal=lambda e: False, split_warning="split after %s"
        )
    assert [item for item, _ in failed] == [-7]
    assert isinstance(failed[0][1], IntegrityError)
    assert await _stored(maker) == [1, 2, 3, 4, 5, 6, 8]
    # whole, then halves down to the bad row: 1 + 2 + 2 + 2 transactions
    assert calls == [items, items[:4], items[4:], [5, 6], [-7, 8], [-7], [8]]
    assert [r.getMessage() for r in caplog.records] == ["split after IntegrityError"]


async def test_a_clean_batch_is_one_transaction_and_logs_nothing(
    maker: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[list[int]] = []
    with caplog.at_level(logging.WARNING, logger="bot.store.write_apart"):
        failed = await write_apart(
            [1, 2, 3], _writer(maker, calls), fatal=lambda e: False, split_warning="%s"
        )
    assert failed == []
    assert calls == [[1, 2, 3]]
    assert await _stored(maker) == [1, 2, 3]
    assert caplog.records == []


async def test_a_single_bad_row_is_returned_not_raised(maker: Maker) -> None:
    failed = await write_apart([-1], _writer(maker, []), fatal=lambda e: False, split_warning="%s")
    assert [item for item, _ in failed] == [-1]
    assert await _stored(maker) == []


async def test_when_every_row_of_several_fails_the_fault_is_raised(maker: Maker) -> None:
    with pytest.raises(IntegrityError):
        await write_apart(
            [-1, -2, -3], _writer(maker, []), fatal=lambda e: False, split_warning="%s"
        )
    assert await _stored(maker) == []


async def test_a_fatal_error_is_raised_at_once_without_splitting(maker: Maker) -> None:
    calls: list[list[int]] = []
    with pytest.raises(IntegrityError):
        await write_apart(
            [1, -2, 3, 4],
            _writer(maker, calls),
            fatal=lambda e: isinstance(e, IntegrityError),
            split_warning="%s",
        )
    assert calls == [[1, -2, 3, 4]]
    assert await _stored(maker) == []


async def test_an_empty_batch_sets_nothing_aside(maker: Maker) -> None:
    nothing: list[int] = []
    failed = await write_apart(
        nothing, _writer(maker, []), fatal=lambda e: False, split_warning="%s"
    )
    assert failed == []
    assert await _stored(maker) == []
