"""Locks on periodic jobs, so one replica runs each job at a time; the lease
itself (claim, renewal, hand-back) is `bot.store.leases`'.

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

from sqlalchemy import update

from bot.store.heartbeats import renew_while
from bot.store.leases import claim_job as claim_job
from bot.store.leases import release_job as release_job
from bot.store.leases import renew_job
from bot.store.session import Db, Sessionmaker
from bot.store.tables import Job, database_now


@contextlib.asynccontextmanager
async def renewing(
    sessionmaker: Sessionmaker, name: str, *, owner: str, lease_seconds: float
) -> AsyncIterator[None]:
    """Renew `owner`'s lease on the job every third of a lease while the body runs
    (no transaction is held meanwhile); a renewal that fails is logged and the
    next one tried, and the body is never interrupted by it."""
    task = asyncio.create_task(_keep(sessionmaker, name, owner=owner, lease_seconds=lease_seconds))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _keep(sessionmaker: Sessionmaker, name: str, *, owner: str, lease_seconds: float) -> None:
    async def once() -> None:
        async with sessionmaker() as db, db.begin():
            await renew_job(db, name, owner=owner, lease_seconds=lease_seconds)

    await renew_while(once, lease_seconds=lease_seconds, what=f"the {name} job's")


@dataclass(frozen=True, slots=True)
class JobRun:
    """What a run that holds its job knows of it, read when it was claimed."""

    # The database's now at the claim: the run's clock.
    now: datetime
    last_run_at: datetime | None
    baseline_at: datetime | None


@contextlib.asynccontextmanager
async def exclusive_job(
    sessionmaker: Sessionmaker, name: str, *, owner: str, lease_seconds: float
) -> AsyncIterator[JobRun | None]:
    """Run the body as the one replica that holds job `name`: None when another
    replica holds it. The lease is renewed while the body runs (no transaction is
    held meanwhile) and given back when it ends, failed or not, so the next run
    is the next tick's, never a lease later."""
    async with sessionmaker() as db, db.begin():
        job = await claim_job(db, name, owner=owner, lease_seconds=lease_seconds)
        if job is not None:
            run = JobRun(
                now=await database_now(db), last_run_at=job.last_run_at, baseline_at=job.baseline_at
            )
    if job is None:
        yield None
        return
    try:
        async with renewing(sessionmaker, name, owner=owner, lease_seconds=lease_seconds):
            yield run
    finally:
        async with sessionmaker() as db, db.begin():
            await release_job(db, name, owner=owner)


async def set_baseline(db: Db, name: str, *, owner: str, at: datetime) -> None:
    """Note where a job's watch begins (the error watch: errors before it are history)."""
    await db.execute(
        update(Job)
        .where(Job.name == name, Job.lease_owner == owner)
        .values(baseline_at=at)
        .execution_options(synchronize_session=False)
    )
