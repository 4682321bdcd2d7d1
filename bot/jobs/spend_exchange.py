"""The Together request budget across replicas (`TOGETHER_REQUESTS_PER_MINUTE`
is the whole deployment's, not each replica's), and each replica's heartbeat.

Every few seconds (`bot.store.heartbeats.heartbeat_every`) each replica writes what it spent in the last
minute to its own row of `replica_spend` (every consumer's requests, and every
one's but the poller's), stamped by the database's clock, and reads the other
replicas' rows in the same short transaction. Its poller then takes the other
live replicas' non-poll spend (their commands and watches) off the budget as
well as its own (`Planner.remote`). Their polls are not taken off: poll work is
claimed one session at a time by one replica, and every replica sizes the
interval for a round over all the watched sessions, so the round is already
counted once. The row's `updated_at` is also the replica's heartbeat: a lease
whose holder's row has not been updated for half a lease is taken over at once
(`bot.store.heartbeats`). A row not updated for `stale_after` is a replica gone:
ignored, and deleted by whoever sees it. A replica that stops deletes its own.

One upsert and one read per exchange (a delete only when a row went stale), in a
transaction that holds no network call. A database error here never stops the
poller: it is logged and the replica goes on with its own count alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from bot.settings.timings import REPORT_STALE_SECONDS, Timings
from bot.store.queries.replica_spend import forget_spend, report_spend
from bot.store.session import Sessionmaker
from bot.together.budget import Ledger


def stale_after(lease_seconds: float) -> float:
    """How old a report is when it is ignored and deleted: at least 30 s (six
    missed reports at the longest heartbeat), and two leases, so the row that
    says a holder's heartbeat stopped outlives every lease it held."""
    return Timings.of_lease(lease_seconds).report_stale


@dataclass(frozen=True)
class Spend:
    """Together requests a minute: by every consumer, and by every one but the poller."""

    requests: float
    others: float

    @classmethod
    def of(cls, ledger: Ledger) -> Spend:
        return cls(requests=ledger.per_minute(), others=ledger.others_per_minute())


def deployment(local: Spend, remote: Iterable[Spend]) -> Spend:
    """What the whole deployment spends a minute: this replica's own count now
    and each other live replica's last report. `others` is what a poller takes
    off the budget before it sizes its interval."""
    requests, others = local.requests, local.others
    for spend in remote:
        requests += spend.requests
        others += spend.others
    return Spend(requests=requests, others=others)


async def exchange(
    sessionmaker: Sessionmaker,
    *,
    owner: str,
    local: Spend,
    stale_seconds: float = REPORT_STALE_SECONDS,
) -> list[Spend]:
    """Report `owner`'s spend; the other live replicas' last reports."""
    async with sessionmaker() as db, db.begin():
        rows = await report_spend(
            db,
            owner=owner,
            requests=math.ceil(local.requests),
            others=math.ceil(local.others),
            stale_seconds=stale_seconds,
        )
    return [Spend(requests=r, others=o) for r, o, fresh in rows if fresh]


async def forget(sessionmaker: Sessionmaker, *, owner: str) -> None:
    """A replica that stops takes its report with it."""
    async with sessionmaker() as db, db.begin():
        await forget_spend(db, owner=owner)
