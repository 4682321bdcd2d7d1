"""Leases: which replica works on which watched session, outbox row or job.

Every leased row carries `lease_owner` and `lease_until`, stamped by the
database's clock (`db_now`), so replicas whose clocks disagree still agree on
who holds what. One predicate says what may be claimed (`claimable`), one
renewal extends only what its owner still holds (`renew`), one hand-back frees
what its owner is done with (`hand_back`); sessions, outbox rows and jobs all
use them. The times (how long, how often, when a holder is gone) are
`bot.store.heartbeats`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, func, or_, select, update

from bot.store.engine import insert_ignoring, rows_touched
from bot.store.heartbeats import holder_gone
from bot.store.session import Db
from bot.store.tables import Job, ReplicaSpend, WatchedSession, db_now

# -- the lease, on any leased table ---------------------------------------------------------------


def claimable(
    entity: Any, *, me: str | None = None, lease_seconds: float = 0.0, unrenewed: bool = True
) -> ColumnElement[bool]:
    """SQL: nobody holds the row, or its lease ran out by the database's clock; with
    `me`, also a row held by another replica whose heartbeat stopped (`holder_gone`,
    which `unrenewed` passes on)."""
    free = [entity.lease_until.is_(None), entity.lease_until < db_now()]
    if me is not None:
        free.append(
            holder_gone(
                entity.lease_owner,
                entity.lease_until,
                me=me,
                lease_seconds=lease_seconds,
                unrenewed=unrenewed,
            )
        )
    return or_(*free)


def leased_to(owner: str, lease_seconds: float) -> dict[str, Any]:
    """The values that lease a row to `owner` for `lease_seconds`, by the database's clock."""
    return {"lease_owner": owner, "lease_until": db_now(lease_seconds)}


#: the values of a row nobody holds
HANDED_BACK: dict[str, Any] = {"lease_owner": None, "lease_until": None}


async def renew(
    db: Db, entity: Any, *where: ColumnElement[bool], owner: str, lease_seconds: float
) -> int:
    """Extend `owner`'s leases on the rows `where` picks, only those it still holds by
    the database's clock: a lease that ran out or was taken over is never revived.
    Returns how many were renewed."""
    result = await db.execute(
        update(entity)
        .where(*where, entity.lease_owner == owner, entity.lease_until > db_now())
        .values(lease_until=db_now(lease_seconds))
        .execution_options(synchronize_session=False)
    )
    return _count(result)


async def hand_back(
    db: Db, entity: Any, *where: ColumnElement[bool], owner: str, **also: Any
) -> int:
    """Give back `owner`'s leases on the rows `where` picks (setting `also` beside),
    so the next claim takes them at once, not when they run out. Returns how many."""
    result = await db.execute(
        update(entity)
        .where(*where, entity.lease_owner == owner)
        .values(**HANDED_BACK, **also)
        .execution_options(synchronize_session=False)
    )
    return _count(result)


def _count(result: Any) -> int:
    return rows_touched(result)


# -- watched sessions (the poller) ---------------------------------------------------------------


async def claim_sessions(
    db: Db,
    *,
    owner: str,
    due_within: float,
    healthy_only: bool,
    limit: int,
    lease_seconds: float,
) -> Sequence[Row[str, str | None, datetime | None, datetime]]:
    """Lease the sessions due within `due_within` seconds that `claimable` allows
    (with `healthy_only`, only those not failing), oldest due first, skipping rows
    another transaction has locked. Each row: `session_id`, its `lease_owner` and
    `lease_until` before this claim, and the database's now (`db_now`).

    A session whose holder's heartbeat stopped is taken however lately its lease
    was renewed: its writes are fenced. A claim stamps the claimer's heartbeat
    too: after a database outage every heartbeat is stale, and the sessions a
    replica just claimed must not look like a silent replica's to the next one
    that reconnects."""
    due = [WatchedSession.next_poll_at <= db_now(due_within)]
    if healthy_only:
        due.append(WatchedSession.consecutive_failures == 0)
    rows = (
        await db.execute(
            select(
                WatchedSession.session_id,
                WatchedSession.lease_owner,
                WatchedSession.lease_until,
                db_now().label("db_now"),
            )
            .where(
                WatchedSession.active.is_(True),
                *due,
                claimable(WatchedSession, me=owner, lease_seconds=lease_seconds, unrenewed=False),
            )
            .order_by(WatchedSession.next_poll_at)
            .limit(limit)
            .with_for_update(skip_locked=True, of=WatchedSession)
        )
    ).all()
    if rows:
        await db.execute(
            update(WatchedSession)
            .where(WatchedSession.session_id.in_([r.session_id for r in rows]))
            .values(**leased_to(owner, lease_seconds))
            .execution_options(synchronize_session=False)
        )
        await db.execute(
            update(ReplicaSpend)
            .where(ReplicaSpend.owner == owner)
            .values(updated_at=db_now())
            .execution_options(synchronize_session=False)
        )
    return rows


async def claim_session(
    db: Db, session_id: str, *, owner: str, lease_seconds: float
) -> Row[datetime, datetime | None, datetime] | None:
    """Lease one watched session if nobody holds it (a command that just fetched it
    writes it as its poll): its `next_poll_at`, `last_polled_at` and the database's
    now (`db_now`); None when it is not watched or a poll holds it."""
    row = (
        await db.execute(
            select(
                WatchedSession.next_poll_at,
                WatchedSession.last_polled_at,
                db_now().label("db_now"),
            )
            .where(
                WatchedSession.session_id == session_id,
                WatchedSession.active.is_(True),
                claimable(WatchedSession),
            )
            .with_for_update(skip_locked=True, of=WatchedSession)
        )
    ).first()
    if row is not None:
        await db.execute(
            update(WatchedSession)
            .where(WatchedSession.session_id == session_id)
            .values(**leased_to(owner, lease_seconds))
            .execution_options(synchronize_session=False)
        )
    return row


async def watched_count(db: Db) -> int:
    """How many sessions are watched in all: what a round of polls costs."""
    return (
        await db.execute(
            select(func.count()).select_from(WatchedSession).where(WatchedSession.active.is_(True))
        )
    ).scalar_one()


async def renew_sessions(db: Db, ids: Sequence[str], *, owner: str, lease_seconds: float) -> int:
    """Renew a batch's leases that `owner` still holds; how many were renewed."""
    return await renew(
        db,
        WatchedSession,
        WatchedSession.session_id.in_(list(ids)),
        owner=owner,
        lease_seconds=lease_seconds,
    )


async def hand_back_sessions(db: Db, ids: Sequence[str] | None, *, owner: str) -> int:
    """Hand back `owner`'s leases on these sessions (None: on every session it holds)."""
    where = () if ids is None else (WatchedSession.session_id.in_(list(ids)),)
    return await hand_back(db, WatchedSession, *where, owner=owner)


# -- periodic jobs -------------------------------------------------------------------------------


async def claim_job(db: Db, name: str, *, owner: str, lease_seconds: float) -> Job | None:
    """The job's row, leased to `owner` by the database's clock; None if another has it."""
    await db.execute(insert_ignoring(db, Job).values(name=name))
    job = (
        await db.execute(
            select(Job).where(Job.name == name, claimable(Job)).with_for_update(skip_locked=True)
        )
    ).scalar_one_or_none()
    if job is not None:
        await db.execute(
            update(Job)
            .where(Job.name == name)
            .values(**leased_to(owner, lease_seconds))
            .execution_options(synchronize_session=False)
        )
    return job


async def renew_job(db: Db, name: str, *, owner: str, lease_seconds: float) -> int:
    """Renew `owner`'s lease on the job, if it still holds it."""
    return await renew(db, Job, Job.name == name, owner=owner, lease_seconds=lease_seconds)


async def release_job(db: Db, name: str, *, owner: str) -> None:
    """Give the job back and note when it last ran, by the database's clock: the
    next run may be another replica's, whose clock may disagree with this one's."""
    await hand_back(db, Job, Job.name == name, owner=owner, last_run_at=db_now())
