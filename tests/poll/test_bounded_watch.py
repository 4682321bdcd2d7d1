"""What the watch keeps stays bounded however much comes from outside: the spend
watch's price cache (resource shapes), the checkpoint keys stored on every poll,
and the items of a checkpoint message (a burst of thousands)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy import select, update

from bot.alerts.resource_reader import MAX_PRICES, PRICE_KEEP_SECONDS, ResourceReader
from bot.outbox.table import OutboxMessage
from bot.poll.record import record_outcomes
from bot.rendering import checkpoint_message
from bot.settings.model import Settings
from bot.simulated import make_model_resource, make_session
from bot.store.engine import make_engine, make_sessionmaker
from bot.store.tables import WatchedSession, db_now
from bot.training.resources import CostEstimate, ModelResource
from bot.training.sessions import RawSession, TrainingSession
from bot.training.transitions import (
    TOLD_CHECKPOINTS,
    checkpoint_keys,
    checkpoint_news,
    checkpoints_beyond,
)
from tests.support import watched_rows

SID = "123e4567-e89b-12d3-a456-426614174000"
OWNER = "replica-a"
T = TypeVar("T")
MANY = 3000

# --- the price cache ------------------------------------------------------------------------


class _Prices:
    """Prices every shape; counts what it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    async def estimate_cost(self, resource: ModelResource) -> CostEstimate:
        self.asked += 1
        return CostEstimate(price_per_hour=1.0 + (resource.replicas or 0))


def test_the_price_cache_is_bounded_in_size_and_in_time() -> None:
    """20,000 resource shapes over 30 simulated days: at most MAX_PRICES are kept,
    a shape priced within the hour is not asked again, and a day after its
    last price a shape is forgotten."""
    now = [0.0]
    prices = _Prices()
    reader = ResourceReader(prices, clock=lambda: now[0])  # type: ignore[arg-type]

    def shape(i: int) -> ModelResource:
        config = {"num_generator_replicas": i, "gpu_type": "H100-80GB"}
        return ModelResource.model_validate(make_model_resource(f"r{i}", compute_config=config))

    async def run() -> None:
        step = 30 * 24 * 3600 / 20_000
        for i in range(20_000):
            now[0] = i * step
            if i % 100 == 0:
                reader.begin_cycle()
            await reader.price(shape(i))
            assert len(reader._prices) <= MAX_PRICES
        asked = prices.asked
        await reader.price(shape(19_999))  # priced just now: from the cache
        assert prices.asked == asked
        now[0] += PRICE_KEEP_SECONDS + 1
        reader.begin_cycle()
        assert reader._prices == {}

    asyncio.run(run())


# --- checkpoint keys and news (pure) ----------------------------------------------------------


def _with(training: int, inference: int) -> dict[str, Any]:
    """A session with `training` and `inference` checkpoints (the first of each made
    like the fake's, the rest newer, one a minute)."""
    row = make_session(SID, checkpoints=max(training, inference))
    row["training_checkpoints"] = row["training_checkpoints"][:training]
    row["inference_checkpoints"] = row["inference_checkpoints"][:inference]
    return row


def test_the_stored_keys_are_the_newest_and_a_count_and_news_is_still_told_once() -> None:
    many = TrainingSession.model_validate(_with(MANY, MANY))
    keys = checkpoint_keys(many)
    assert len(json.dumps(keys)) < 4000  # was 570 KB
    assert f"t#{MANY}" in keys and f"i#{MANY}" in keys
    assert checkpoint_news(keys, many) == [] and checkpoints_beyond(keys, many) == 0

    one_more = TrainingSession.model_validate(_with(MANY + 1, MANY))
    news = checkpoint_news(keys, one_more)
    assert [(i.kind, i.id) for i in news] == [("training", one_more.training_checkpoints[-1].id)]
    assert checkpoints_beyond(keys, one_more) == 0
    after = checkpoint_keys(one_more)
    assert checkpoint_news(after, one_more) == []  # told once

    burst = TrainingSession.model_validate(_with(MANY + 500, MANY))
    news = checkpoint_news(after, burst)
    assert len(news) == TOLD_CHECKPOINTS  # the newest, in items
    assert checkpoints_beyond(after, burst) == 499 - TOLD_CHECKPOINTS  # the rest, a count


def test_keys_stored_whole_before_still_count_what_was_there() -> None:
    """A watch stored every key (no count): the count is the keys it had."""
    before = TrainingSession.model_validate(_with(30, 30))
    whole = [
        key
        for code, cps in (("t", before.training_checkpoints), ("i", before.inference_checkpoints))
        for cp in cps
        for key in (f"{code}:{cp.id}", f"{code}:{cp.id}:registered")
    ]
    burst = TrainingSession.model_validate(_with(60, 30))
    assert len(checkpoint_news(whole, burst)) == TOLD_CHECKPOINTS
    assert checkpoints_beyond(whole, burst) == 30 - TOLD_CHECKPOINTS


# --- what a poll stores and queues (each database) --------------------------------------------


def _run(db_url: str, work: Callable[[Any], Awaitable[T]]) -> T:
    async def go() -> T:
        engine = make_engine(db_url)
        try:
            return await work(make_sessionmaker(engine))
        finally:
            await engine.dispose()

    return asyncio.run(go())


async def _poll(maker: Any, row: dict[str, Any]) -> None:
    async with maker() as db, db.begin():
        await db.execute(
            update(WatchedSession)
            .where(WatchedSession.session_id == SID)
            .values(lease_owner=OWNER, lease_until=db_now(60))
        )
    async with maker() as db, db.begin():
        await record_outcomes(
            db,
            {SID: RawSession.of(row)},
            owner=OWNER,
            settings=Settings(_env_file=None),
            interval=30,
        )


def test_thousands_of_checkpoints_keep_the_column_and_the_row_small(db_url: str) -> None:
    """3,000 checkpoints of each kind: the stored keys and a burst's outbox row stay a
    few KB, and a new checkpoint is still told once."""

    async def work(maker: Any) -> None:
        first = _with(MANY, MANY)
        async with maker() as db, db.begin():
            session = TrainingSession.model_validate(first)
            db.add_all(watched_rows(session, filters="status,checkpoints"))
        for row in (first, _with(MANY + 1, MANY), _with(MANY + 1, MANY), _with(2 * MANY, MANY)):
            await _poll(maker, row)
            async with maker() as db:
                keys = (await db.execute(select(WatchedSession.checkpoint_keys))).scalar_one()
                assert len(json.dumps(keys)) < 4000
        async with maker() as db:
            rows = list((await db.execute(select(OutboxMessage))).scalars())
        assert [r.kind for r in rows] == ["checkpoints", "checkpoints"]  # the one, the burst
        one, burst = (r.payload for r in rows)
        assert len(one["items"]) == 1 and one["more"] == 0
        assert len(burst["items"]) == TOLD_CHECKPOINTS
        assert burst["more"] == MANY - 1 - TOLD_CHECKPOINTS
        for payload in (one, burst):
            assert len(json.dumps(payload)) < 16_000, len(json.dumps(payload))

    _run(db_url, work)


def test_a_burst_is_told_as_its_newest_and_a_count() -> None:
    burst = TrainingSession.model_validate(_with(MANY + 500, MANY))
    keys = checkpoint_keys(TrainingSession.model_validate(_with(MANY, MANY)))
    items = checkpoint_news(keys, burst)
    text = json.dumps(
        checkpoint_message(burst, items, more=checkpoints_beyond(keys, burst)), ensure_ascii=False
    )
    assert "500 new checkpoint events" in text and "…and 490 more" in text
