"""Queries on the replicas' spend reports (`replica_spend`): each replica's row,
stamped by the database's clock, is also its heartbeat (`bot.store.heartbeats`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select

from bot.store.engine import upsert
from bot.store.session import Db
from bot.store.tables import ReplicaSpend, db_now


async def report_spend(
    db: Db, *, owner: str, requests: int, others: int, stale_seconds: float
) -> list[tuple[Any, Any, bool]]:
    """Write `owner`'s report; the other replicas' reports as (requests, others,
    fresh), fresh when written within `stale_seconds`. Stale reports are deleted
    when there are any."""
    values = {"owner": owner, "requests": requests, "others": others, "updated_at": db_now()}
    await db.execute(upsert(db, ReplicaSpend, values, key=["owner"]))
    rows = (
        await db.execute(
            select(
                ReplicaSpend.requests,
                ReplicaSpend.others,
                ReplicaSpend.updated_at >= db_now(-stale_seconds),
            ).where(ReplicaSpend.owner != owner)
        )
    ).all()
    if not all(fresh for _, _, fresh in rows):
        await db.execute(
            delete(ReplicaSpend).where(ReplicaSpend.updated_at < db_now(-stale_seconds))
        )
    return [(r, o, bool(fresh)) for r, o, fresh in rows]


async def forget_spend(db: Db, *, owner: str) -> None:
    """Delete `owner`'s report (a replica that stops)."""
    await db.execute(delete(ReplicaSpend).where(ReplicaSpend.owner == owner))
