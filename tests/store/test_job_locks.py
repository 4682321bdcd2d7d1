"""A periodic job's lock is as short as a poll's lease and renewed while the job
runs: a second replica never starts the same run beside a long one, and a
replica that dies mid-run gives the job back within one lease."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.store.engine import make_engine, make_sessionmaker
from bot.store.job_locks import claim_job, exclusive_job, release_job, renewing

LEASE = 2.0  # renewed every 0.67 s: a loaded machine still renews in time


async def _claim(maker: async_sessionmaker[AsyncSession], owner: str) -> bool:
    async with maker() as db, db.begin():
        return await claim_job(db, "job", owner=owner, lease_seconds=LEASE) is not None


@pytest.mark.slow  # waits out three leases in real time
async def test_a_job_longer_than_its_lease_keeps_it_and_gives_it_back_when_its_holder_stops(
    db_url: str,
) -> None:
    engine = make_engine(db_url)
    maker = make_sessionmaker(engine)
    try:
        assert await _claim(maker, "a")
        async with renewing(maker, "job", owner="a", lease_seconds=LEASE):
            # two leases long: without the renewals, b would have it after one
            for _ in range(4):
                await asyncio.sleep(LEASE / 2)
                assert not await _claim(maker, "b")
        # a stops renewing without releasing (it died): b has it within one lease
        for _ in range(40):
            if await _claim(maker, "b"):
                break
            await asyncio.sleep(LEASE / 6)
        else:
            raise AssertionError("the job was never given back")
        async with maker() as db, db.begin():
            await release_job(db, "job", owner="b")
        assert await _claim(maker, "a")
    finally:
        await engine.dispose()


async def test_an_exclusive_job_runs_once_at_a_time_and_is_given_back_even_when_it_fails(
    db_url: str,
) -> None:
    engine = make_engine(db_url)
    maker = make_sessionmaker(engine)
    try:
        async with exclusive_job(maker, "job", owner="a", lease_seconds=30.0) as run:
            assert run is not None and run.last_run_at is None
            # another replica is refused while a holds it
            async with exclusive_job(maker, "job", owner="b", lease_seconds=30.0) as other:
                assert other is None
        with pytest.raises(RuntimeError):
            async with exclusive_job(maker, "job", owner="a", lease_seconds=30.0) as run:
                assert run is not None and run.last_run_at is not None
                raise RuntimeError("the body failed")
        # given back at once, not a 30 s lease later
        assert await _claim(maker, "b")
    finally:
        await engine.dispose()
