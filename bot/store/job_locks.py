"""Locks on periodic jobs, so one replica runs each job at a time.

A job's row carries a lease stamped by the database's clock, as short as the
poll's: a replica that dies mid-run gives the job back within one lease. A job
whose run is longer than that (a list pass, W&B reads) renews its lease while
it runs (`renewing`), or a second replica would start the same run beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.store.engine import insert_ignoring
from bot.store.heartbeats import renew_while
from bot.store.tables import Job, database_now, db_now


async def claim_job(db: AsyncSession, name: str, *, owner: str, lease: float) -> Job | None:
    """The job's row, leased to `owner` by the database's clock; None if another has it."""
    await db.execute(insert_ignoring(db, Job).values(name=name))
    job = (
        await db.execute(
            select(Job)
            .where(Job.name == name, or_(Job.lease_until.is_(None), Job.lease_until < db_now()))
            .with_for_update(skip_locked=True)
        )
    ).scalar_one_or_none()
    if job is not None:
        await db.execute(
            update(Job)
            .where(Job.name == name)
            .values(lease_owner=owner, lease_until=db_now(lease))
            .execution_options(synchronize_session=False)
        )
    return job


async def release_job(db: AsyncSession, name: str, *, owner: str) -> None:
    """Give the job back and note when it last ran, by the database's clock: the
    next run may be another replica's, whose clock may disagree with this one's."""
    await db.execute(
        update(Job)
        .where(Job.name == name, Job.lease_owner == owner)
        .values(lease_owner=None, lease_until=None, last_run_at=db_now())
    )


@contextlib.asynccontextmanager
async def renewing(
    sessionmaker: async_sessionmaker[AsyncSession], name: str, *, owner: str, lease: float
) -> AsyncIterator[None]:
    """Renew `owner`'s lease on the job every third of a lease while the body runs
    (no transaction is held meanwhile); a renewal that fails is logged and the
    next one tried, and the body is never interrupted by it."""
    task = asyncio.create_task(_keep(sessionmaker, name, owner=owner, lease=lease))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _keep(
    sessionmaker: async_sessionmaker[AsyncSession], name: str, *, owner: str, lease: float
) -> None:
    async def once() -> None:
        async with sessionmaker() as db, db.begin():
            await db.execute(
                update(Job)
                .where(Job.name == name, Job.lease_owner == owner, Job.lease_until > db_now())
                .values(lease_until=db_now(lease))
                .execution_options(synchronize_session=False)
            )

    await renew_while(once, lease_seconds=lease, what=f"the {name} job's")


@dataclass(frozen=True, slots=True)
class JobRun:
    """What a run that holds its job knows of it, read when it was claimed."""

    # The database's now at the claim: the run's clock.
    now: datetime
    last_run_at: datetime | None
    baseline_at: datetime | None


@contextlib.asynccontextmanager
async def exclusive_job(
    sessionmaker: async_sessionmaker[AsyncSession], name: str, *, owner: str, lease: float
) -> AsyncIterator[JobRun | None]:
    """Run the body as the one replica that holds job `name`: None when another
    replica holds it. The lease is renewed while the body runs (no transaction is
    held meanwhile) and given back when it ends, failed or not, so the next run
    is the next tick's, never a lease later."""
    async with sessionmaker() as db, db.begin():
        job = await claim_job(db, name, owner=owner, lease=lease)
        if job is not None:
            run = JobRun(
                now=await database_now(db), last_run_at=job.last_run_at, baseline_at=job.baseline_at
            )
    if job is None:
        yield None
        return
    try:
        async with renewing(sessionmaker, name, owner=owner, lease=lease):
            yield run
    finally:
        async with sessionmaker() as db, db.begin():
            await release_job(db, name, owner=owner)


async def set_baseline(db: AsyncSession, name: str, *, owner: str, at: datetime) -> None:
    """Note where a job's watch begins (the error watch: errors before it are history)."""
    await db.execute(
        update(Job)
        .where(Job.name == name, Job.lease_owner == owner)
        .values(baseline_at=at)
        .execution_options(synchronize_session=False)
    )
