"""Queries on the request budget's books (`together_grants`): one short
transaction per reservation, under one lock for the whole deployment, so two
replicas never grant the same share twice. Who may have how many is decided
by the caller's rule (`bot.together.shares`), from what is read here.

A replica refused a share it will wait for leaves a mark in the books (a row of
no requests), again at each try; while another replica's mark for the same tier
is older than its own and fresh (its owner still asking), it is refused too, so
the replicas waiting on one tier are served first come, first served, and none
waits on a tier another keeps taking. A grant takes its owner's marks away."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, insert, select, text

from bot.store.session import Db
from bot.store.tables import TogetherGrant, database_now, db_now

#: the key of PostgreSQL's advisory lock around a reservation
_LOCK_KEY = 0x7267_6276  # "rgbv"
#: the longest a refused caller is told to wait before it asks again
MAX_RETRY_SECONDS = 5.0
#: the shortest
MIN_RETRY_SECONDS = 0.2
#: a mark whose owner has not asked again for this long is given up (its waiter ended)
MARK_FRESH_SECONDS = MAX_RETRY_SECONDS + 2.0
#: marks are kept at most this long
MARK_KEEP_SECONDS = 600.0


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
    waits: bool = False,
) -> Reservation:
    """Grant `tier` what `decide` allows after every tier's spend in the last
    `window_seconds` (by the database's clock), unless another replica has waited
    longer for `tier` (`first_in_line`); a refused caller that `waits` leaves its
    mark. Rows older than two windows (marks: `MARK_KEEP_SECONDS`) are deleted on
    the way: that delete is also the first write, which takes SQLite's lock before
    anything is read."""
    await db.execute(
        delete(TogetherGrant).where(
            ((TogetherGrant.n > 0) & (TogetherGrant.at < db_now(-2 * window_seconds)))
            | (TogetherGrant.at < db_now(-MARK_KEEP_SECONDS))
        )
    )
    if db.get_bind().dialect.name == "postgresql":
        await db.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
    rows = (
        await db.execute(
            select(TogetherGrant.tier, func.sum(TogetherGrant.n), func.min(TogetherGrant.at))
            .where(TogetherGrant.at > db_now(-window_seconds), TogetherGrant.n > 0)
            .group_by(TogetherGrant.tier)
        )
    ).all()
    spent = {str(t): int(n or 0) for t, n, _ in rows}
    marks = (
        await db.execute(
            select(TogetherGrant.owner, func.min(TogetherGrant.at), func.max(TogetherGrant.at))
            .where(TogetherGrant.tier == tier, TogetherGrant.n == 0)
            .group_by(TogetherGrant.owner)
        )
    ).all()
    now = await database_now(db) if marks else None
    ahead = now is not None and not first_in_line(
        owner, {str(o): (first, last) for o, first, last in marks}, now=now
    )
    granted = 0 if ahead else max(0, int(decide(spent)))
    if granted:
        await db.execute(
            insert(TogetherGrant).values(at=db_now(), owner=owner, tier=tier, n=granted)
        )
        if marks:
            await db.execute(
                delete(TogetherGrant).where(
                    TogetherGrant.owner == owner, TogetherGrant.tier == tier, TogetherGrant.n == 0
                )
            )
        return Reservation(granted, spent, 0.0)
    if waits:
        await db.execute(insert(TogetherGrant).values(at=db_now(), owner=owner, tier=tier, n=0))
    oldest: list[datetime] = [at for _, _, at in rows if at is not None]
    retry = MAX_RETRY_SECONDS
    if oldest:
        now = await database_now(db)
        leaves = (min(oldest) - now).total_seconds() + window_seconds
        retry = min(MAX_RETRY_SECONDS, max(MIN_RETRY_SECONDS, leaves))
    return Reservation(0, spent, retry)


def first_in_line(
    owner: str, marks: Mapping[str, tuple[datetime, datetime]], *, now: datetime
) -> bool:
    """Whether `owner` may be served: no other owner's fresh mark (first and last
    ask) is older than `owner`'s own first (or than now, if it has none)."""
    mine = marks.get(owner, (now, now))[0]
    fresh = timedelta(seconds=MARK_FRESH_SECONDS)
    return not any(
        other != owner and last >= now - fresh and first < mine
        for other, (first, last) in marks.items()
    )


async def record(db: Db, *, owner: str, tier: str, n: int) -> None:
    """Book `n` requests already sent (people's: never refused, counted)."""
    if n > 0:
        await db.execute(insert(TogetherGrant).values(at=db_now(), owner=owner, tier=tier, n=n))
