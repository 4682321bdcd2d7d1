"""Locks on periodic jobs, so one replica runs each job at a time.

A job's row carries a lease stamped by the database's clock: a replica that
dies mid-run gives the job back when the lease runs out.
"""

from __future__ import annotations

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.engine import insert_ignoring
from bot.store.tables import Job, db_now


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
