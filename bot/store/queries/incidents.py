"""Queries on operator incidents: one row per named incident, locked while it is
judged so two replicas never open or close it twice."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from bot.store.session import Db
from bot.store.tables import Incident


async def locked_incident(db: Db, name: str) -> Incident | None:
    """The incident `name`, locked until the commit; None if it was never opened."""
    return (
        await db.execute(select(Incident).where(Incident.name == name).with_for_update())
    ).scalar_one_or_none()


async def open_incident(db: Db, name: str, *, now: datetime) -> Incident:
    """A new incident `name`, opened `now` and written at once."""
    row = Incident(name=name, opened_at=now, seq=0)
    db.add(row)
    await db.flush()
    return row
