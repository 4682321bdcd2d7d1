"""Rows the store tests start from: a subscription and a watched session with
only what the test is about filled in."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.tables import Subscription, WatchedSession

TEAM = "T1"
CHANNEL = "C1"


async def add_subscription(
    db: AsyncSession,
    session_id: str,
    *,
    team_id: str = TEAM,
    channel_id: str = CHANNEL,
    created_at: datetime | None = None,
    **over: Any,
) -> Subscription:
    """A subscription (active unless `active=False` is given), flushed so it has its id."""
    values: dict[str, Any] = {
        "team_id": team_id,
        "channel_id": channel_id,
        "session_id": session_id,
        "root_ts": f"1700000000.{session_id[-6:]:0>6}",
        "subscribed_by": "U1",
    }
    if created_at is not None:
        values["created_at"] = created_at
    sub = Subscription(**(values | over))
    db.add(sub)
    await db.flush()
    return sub


async def add_watch(db: AsyncSession, session_id: str, **over: Any) -> WatchedSession:
    values: dict[str, Any] = {
        "session_id": session_id,
        "last_status": "RUNNING",
        "snapshot": {"id": session_id, "status": "RUNNING"},
    }
    watch = WatchedSession(**(values | over))
    db.add(watch)
    await db.flush()
    return watch
