"""Queries on the request budget's books (`together_grants`): one short
transaction per reservation, under one lock for the whole deployment, so two
replicas never grant the same share twice. Who may have how many is decided
by the caller's rule (`bot.together.shares`), from what is read here.

A replica refused a share it will wait for leaves a mark in the books (a row of
no requests), again at each try; while another replica's mark for the same tier
is older than its own and fresh (its owner still asking), it is refused too, so
the replicas waiting on one tier are served first come, first served, and none
waits on a tier another keeps taking. A grant takes its owner's marks away.
A refused caller that does not wait leaves an ask instead (-1 requests), out of
the line: a tier with any row in the window asked in it, and holds its floor."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
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
#: the requests of a refused caller's row that does not wait: an ask, out of the line
ASK = -1


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
    decide: Callable[[Mapping[str, int], frozenset[str]], int],
    waits: bool = False,
) -> Reservation:
    """Grant `tier` what `decide` allows after every tier's spend in the last
    `window_seconds` (by the database's clock; a tier that only asked in it
    with 0), unless another replica has waited longer for `tier`
    (`first_in_line`), and which tiers have asked all along for a window
    (`steady_tiers`); a refused caller that `waits` leaves its mark, another
    its ask. Rows older than two windows (marks: `MARK_KEEP_SECONDS`) are deleted on
    the way: that delete is also the first write, which takes SQLite's lock before
    anything is read."""
    await db.execute(
        delete(TogetherGrant).where(
            ((TogetherGrant.n != 0) & (TogetherGrant.at < db_now(-2 * window_seconds)))
            | (TogetherGrant.at < db_now(-MARK_KEEP_SECONDS))
        )
    )
    if db.get_bind().dialect.name == "postgresql":
        await db.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
    now = await database_now(db)
    rows = (
        await db.execute(
            select(TogetherGrant.tier, TogetherGrant.n, TogetherGrant.at).where(
                TogetherGrant.at > db_now(-2 * window_seconds)
            )
        )
    ).all()
    books = [(str(t), n, (at - now).total_seconds()) for t, n, at in rows]
    spent = spent_in(books, window_seconds)
    steady = steady_tiers(books, window_seconds)
    marks = (
        await db.execute(
            select(TogetherGrant.owner, func.min(TogetherGrant.at), func.max(TogetherGrant.at))
            .where(TogetherGrant.tier == tier, TogetherGrant.n == 0)
            .group_by(TogetherGrant.owner)
        )
    ).all()
    ahead = bool(marks) and not first_in_line(
        owner, {str(o): (first, last) for o, first, last in marks}, now=now
    )
    granted = 0 if ahead else max(0, int(decide(spent, steady)))
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
    await db.execute(
        insert(TogetherGrant).values(at=db_now(), owner=owner, tier=tier, n=0 if waits else ASK)
    )
    oldest = [ago for _, n, ago in books if n > 0 and ago > -window_seconds]
    retry = MAX_RETRY_SECONDS
    if oldest:
        leaves = min(oldest) + window_seconds
        retry = min(MAX_RETRY_SECONDS, max(MIN_RETRY_SECONDS, leaves))
    return Reservation(0, spent, retry)


def spent_in(books: Iterable[tuple[str, int, float]], window: float) -> dict[str, int]:
    """Each tier's requests in the last `window` seconds of the books' rows (tier,
    requests, seconds from now, <= 0); a tier that only asked in it with 0."""
    spent: dict[str, int] = {}
    for tier, n, ago in books:
        if ago > -window:
            spent[tier] = spent.get(tier, 0) + max(0, n)
    return spent


def steady_tiers(books: Iterable[tuple[str, int, float]], window: float) -> frozenset[str]:
    """The tiers that have been asking all along for the last `window` seconds: a
    row of each at least every `window`, from one before the window began. Every
    grant in their window was made while they held their floor."""
    times: dict[str, list[float]] = {}
    for tier, _, ago in books:
        times.setdefault(tier, []).append(ago)
    steady = set()
    for tier, seen in times.items():
        after = 0.0  # walking back from now, the oldest row met so far
        for ago in sorted(seen, reverse=True):
            if after - ago >= window:
                break
            after = ago
        if after <= -window:
            steady.add(tier)
    return frozenset(steady)


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
