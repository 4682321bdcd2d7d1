"""Which replica polls which session: claims, renewals and hand-backs of leases.

Replicas share the work through the database: due sessions are claimed with
`FOR UPDATE SKIP LOCKED` and a short lease, so no two replicas poll the same
session. A crashed replica's sessions come back once its lease runs out, or at
once when its heartbeat has stopped (`bot.store.heartbeats`): those are adopted
and what they waited is reported. Leases are judged by the database's clock; a
claim is sized to what can be fetched in half a lease at `TOGETHER_MAX_RPS`
(`pace.claim_size`), and the leases are renewed while the work goes on. The
statements are `bot.store.leases`', shared with outbox rows and jobs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from bot.poll.pace import claim_size, due_slack
from bot.settings.model import Settings
from bot.store.heartbeats import held_for, renew_while
from bot.store.leases import (
    claim_sessions,
    hand_back_sessions,
    renew_sessions,
    watched_count,
)
from bot.store.session import Sessionmaker

log = logging.getLogger(__name__)


@dataclass
class Claim:
    """Sessions leased by one claim: their ids, the database's time of the claim,
    how many sessions are watched in all (what a round of polls costs; 0 for a
    claim `ahead`), and, for each one taken over from another replica, how long
    its holder had not renewed it."""

    ids: list[str] = field(default_factory=list)
    at: datetime | None = None
    watched: int = 0
    adopted: dict[str, float] = field(default_factory=dict)


async def claim_due_sessions(
    sessionmaker: Sessionmaker,
    *,
    owner: str,
    settings: Settings,
    ahead: float = 0.0,
    limit: int | None = None,
) -> Claim:
    """Lease due sessions that nobody holds, whose lease ran out, or whose holder's
    heartbeat stopped. With `ahead`, the sessions due within that many seconds
    instead, those not failing (a failing one keeps its back-off and Retry-After)."""
    async with sessionmaker() as db, db.begin():
        rows = await claim_sessions(
            db,
            owner=owner,
            due_within=due_slack(settings) + ahead,
            healthy_only=bool(ahead),
            limit=limit or claim_size(settings),
            lease_seconds=settings.lease_seconds,
        )
        ids = [r.session_id for r in rows]
        watched = await watched_count(db) if ids and not ahead else 0
    adopted = {
        r.session_id: held_for(r.lease_until, r.db_now, settings.lease_seconds)
        for r in rows
        if r.lease_owner is not None and r.lease_owner != owner
    }
    if adopted:
        log.warning(
            "took over %d sessions from replicas that stopped (their leases not renewed "
            "for up to %.1fs)",
            len(adopted),
            max(adopted.values()),
            extra={"from": sorted({r.lease_owner for r in rows if r.session_id in adopted})},
        )
    return Claim(ids, rows[0].db_now if rows else None, watched, adopted)


async def release(sessionmaker: Sessionmaker, ids: list[str], *, owner: str) -> None:
    """Hand back the leases of sessions claimed but not polled after all (those
    written meanwhile were handed back with their results)."""
    async with sessionmaker() as db, db.begin():
        await hand_back_sessions(db, ids, owner=owner)


async def release_all(sessionmaker: Sessionmaker, *, owner: str) -> int:
    """Hand back every session lease held in `owner`'s name: after a cycle that
    failed and could not hand back its own (the database was away), before the
    next one claims; no batch of this replica's is running then."""
    async with sessionmaker() as db, db.begin():
        return await hand_back_sessions(db, None, owner=owner)


async def keep_leases(
    sessionmaker: Sessionmaker,
    ids: list[str],
    *,
    owner: str,
    lease_seconds: float,
    renewed: Callable[[int], None] | None = None,
) -> None:
    """Renew a batch's leases every third of a lease while it is worked on; only
    those this replica still holds (by the database's clock). `renewed` hears
    how many were renewed each time."""

    async def once() -> None:
        async with sessionmaker() as db, db.begin():
            count = await renew_sessions(db, ids, owner=owner, lease_seconds=lease_seconds)
        if renewed is not None:
            renewed(count)

    await renew_while(once, lease_seconds=lease_seconds, what="poll")
