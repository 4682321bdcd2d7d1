"""Queries on the request budget's books (`together_grants`): one short
transaction per reservation, under one lock for the whole deployment, so two
replicas never grant the same share twice. Who may have how many is decided
by the caller's rule (`bot.together.shares`), from what is read here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, insert, select, text

from bot.store.session import Db
from bot.store.tables import TogetherGrant, database_now, db_now

#: the key of PostgreSQL's advisory lock around a reservation
_LOCK_KEY = 0x7267_6276  # "rgbv"
#: the longest a refused caller is told to wait before it asks again
MAX_RETRY_SECONDS = 5.0
#: the shortest
MIN_RETRY_SECONDS = 0.2


@dataclass(frozen=True)
class Reservation:
    """What a reservation got, what every tier had spent in the window before it
    (its own grant not included), and when to ask again if it got nothing."""

    granted: int
    spent: dict[str, int]
    retry_in: float


async def reserve(
    db: Db,
    *,
    owner: str,
    tier: str,
    window_seconds: float,
    decide: Callable[[Mapping[str, int]], int],
) -> Reservation:
    """Grant `tier` what `decide` allows after every tier's spend in the last
    `window_seconds` (by the database's clock); `decide` returning 0 grants nothing
    and writes nothing. Rows older than two windows are deleted on the way: that
    delete is also the first write, which takes SQLite's lock before anything is read."""
    await db.execute(delete(TogetherGrant).where(TogetherGrant.at < db_now(-2 * window_seconds)))
    if db.get_bind().dialect.name == "postgresql":
        await db.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
    rows = (
        await db.execute(
            select(TogetherGrant.tier, func.sum(TogetherGrant.n), func.min(TogetherGrant.at))
            .where(TogetherGrant.at > db_now(-window_seconds))
            .group_by(TogetherGrant.tier)
        )
    ).all()
    spent = {str(t): int(n or 0) for t, n, _ in rows}
    granted = max(0, int(decide(spent)))
    if granted:
        await db.execute(
            insert(TogetherGrant).values(at=db_now(), owner=owner, tier=tier, n=granted)
        )
        return Reservation(granted, spent, 0.0)
    oldest: list[datetime] = [at for _, _, at in rows if at is not None]
    retry = MAX_RETRY_SECONDS
    if oldest:
        now = await database_now(db)
        leaves = (min(oldest) - now).total_seconds() + window_seconds
        retry = min(MAX_RETRY_SECONDS, max(MIN_RETRY_SECONDS, leaves))
    return Reservation(0, spent, retry)


async def record(db: Db, *, owner: str, tier: str, n: int) -> None:
    """Book `n` requests already sent (people's: never refused, counted)."""
    if n > 0:
        await db.execute(insert(TogetherGrant).values(at=db_now(), owner=owner, tier=tier, n=n))
