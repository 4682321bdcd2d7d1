"""The one lease, on a real database: sessions and jobs are claimed, renewed and
handed back through the same predicate and statements (`bot.store.leases`). A
session held by a replica whose heartbeat stopped is adopted at once; a job
waits its lease out (its holder may be running a long pass)."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.store.leases import (
    claim_job,
    claim_session,
    claim_sessions,
    hand_back_sessions,
    renew_sessions,
)
from bot.store.tables import Job, ReplicaSpend, WatchedSession, database_now
from tests.support.store_rows import add_watch

Maker = async_sessionmaker[AsyncSession]
LEASE = 30.0


async def _claim(maker: Maker, owner: str) -> list[str]:
    async with maker() as db, db.begin():
        rows = await claim_sessions(
            db, owner=owner, due_within=0.0, healthy_only=False, limit=10, lease_seconds=LEASE
        )
    return sorted(r.session_id for r in rows)


async def _held_by_a_silent_replica(maker: Maker, *, now: datetime) -> None:
    """Session `s` and job `j`, both held by `dead` until a lease ago plus a moment:
    unrenewed for two thirds of a lease, and `dead`'s heartbeat a lease old."""
    until = now + timedelta(seconds=LEASE / 4)
    async with maker() as db, db.begin():
        await add_watch(db, "s", next_poll_at=now, lease_owner="dead", lease_until=until)
        db.add(Job(name="j", lease_owner="dead", lease_until=until))
        db.add(
            ReplicaSpend(owner="dead", requests=0, others=0, updated_at=now - timedelta(hours=1))
        )


async def test_a_session_of_a_replica_gone_silent_is_adopted_but_its_job_waits_the_lease_out(
    maker: Maker,
) -> None:
    async with maker() as db:
        now = await database_now(db)
    await _held_by_a_silent_replica(maker, now=now)
    assert await _claim(maker, "b") == ["s"]
    async with maker() as db, db.begin():
        assert await claim_job(db, "j", owner="b", lease_seconds=LEASE) is None
        # a command's own claim never takes a lease that has not run out
        assert await claim_session(db, "s", owner="c", lease_seconds=LEASE) is None


async def test_renewal_and_hand_back_touch_only_the_owners_leases(maker: Maker) -> None:
    async with maker() as db:
        now = await database_now(db)
    async with maker() as db, db.begin():
        await add_watch(db, "s1", next_poll_at=now)
        await add_watch(db, "s2", next_poll_at=now)
    assert await _claim(maker, "a") == ["s1", "s2"]
    async with maker() as db, db.begin():
        assert await renew_sessions(db, ["s1", "s2"], owner="b", lease_seconds=LEASE) == 0
        assert await renew_sessions(db, ["s1"], owner="a", lease_seconds=LEASE) == 1
        assert await hand_back_sessions(db, ["s1"], owner="b") == 0
        assert await hand_back_sessions(db, None, owner="a") == 2
    async with maker() as db:
        watch = await db.get(WatchedSession, "s1")
    assert watch is not None and (watch.lease_owner, watch.lease_until) == (None, None)
    async with maker() as db, db.begin():
        row = await claim_session(db, "s2", owner="c", lease_seconds=LEASE)
    assert row is not None
    assert await _claim(maker, "a") == ["s1"]
