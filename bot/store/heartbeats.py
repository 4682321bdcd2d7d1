"""How long a lease lasts, how often it is renewed, and when its holder counts as gone.

Every lease (a poll claim on a session, a delivery claim on an outbox row) is
short and is renewed while the work runs, so a replica that dies, hangs or
loses its database gives its work back within one lease. Each replica also
writes a heartbeat, its row of `replica_spend` (`bot.jobs.spend_exchange`),
stamped by the database's clock: a lease whose holder has stopped writing it,
and has stopped renewing that lease too, is taken without waiting for the
lease to run out.

The times are sized from one lease (`LEASE_SECONDS`, `bot.settings.timings`) so
that they stay in step when it is changed:

- the work renews its leases every third of a lease (`renew_every`), so two
  renewals in a row may fail (a database blip) before the lease runs out;
- the heartbeat is written every tenth of a lease, at most every
  five seconds (`heartbeat_every`);
- a holder is gone when its heartbeat is older than a quarter of a lease
  (`silent_after`): two heartbeats and a half missed, so one slow write is
  not a death, and its work is back well before its lease would run out;
- a gone holder's watched sessions are taken at once: a poll taken over from
  a replica that is in fact alive costs a second read, never a second
  message, since every write of a poll is fenced on its lease;
- but one of its outbox rows is taken only once that lease has gone two
  renewals without one (`unrenewed_after`). A replica whose heartbeat lags
  behind a database blip but which is at work keeps what it works on: a
  delivery renews a row's lease just before it posts (the fence), so the row
  cannot be taken, and posted again, while that post is in flight. Two
  renewals are two thirds of a lease, longer than Slack's 10 s timeout at
  the default.

A replica with no heartbeat row at all (one that has not reported yet) is
trusted until its lease runs out: only a heartbeat that stopped says a holder
is gone. Being wrong about a live replica costs work done twice, never a
message told twice: every write and every send is fenced on the lease.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, select

from bot.settings.timings import Timings
from bot.store.tables import ReplicaSpend, db_now

log = logging.getLogger(__name__)


def renew_every(lease_seconds: float) -> float:
    """How often the work renews the leases it holds."""
    return Timings.of_lease(lease_seconds).renew_every


async def renew_while(
    renew: Callable[[], Awaitable[object]], *, lease_seconds: float, what: str
) -> None:
    """Call `renew` every third of a lease until cancelled (run it as a task beside
    the work). A renewal that fails is logged and the next one tried: the fences
    still hold meanwhile, and two may fail before the lease runs out."""
    while True:
        await asyncio.sleep(renew_every(lease_seconds))
        try:
            await renew()
        except Exception:
            log.warning("could not renew %s leases", what, exc_info=True)


def heartbeat_every(lease_seconds: float) -> float:
    """How often a replica writes its heartbeat."""
    return Timings.of_lease(lease_seconds).heartbeat_every


def silent_after(lease_seconds: float) -> float:
    """How old a heartbeat is when its replica counts as gone."""
    return Timings.of_lease(lease_seconds).silent_after


def unrenewed_after(lease_seconds: float) -> float:
    """How long a lease of a silent holder goes without renewal before it is taken."""
    return Timings.of_lease(lease_seconds).unrenewed_after


def holder_gone(
    lease_owner: ColumnElement[Any] | Any,
    lease_until: ColumnElement[Any] | Any,
    *,
    me: str,
    lease_seconds: float,
    unrenewed: bool = True,
) -> ColumnElement[bool]:
    """SQL: the lease's holder is another replica whose heartbeat has stopped and,
    with `unrenewed` (what a post in flight needs), which has not renewed this
    lease for `unrenewed_after` either."""
    silent = select(ReplicaSpend.owner).where(
        ReplicaSpend.owner != me,
        ReplicaSpend.updated_at < db_now(-silent_after(lease_seconds)),
    )
    gone = [lease_owner.is_not(None), lease_owner != me, lease_owner.in_(silent)]
    if unrenewed:
        gone.append(lease_until < db_now(lease_seconds - unrenewed_after(lease_seconds)))
    return and_(*gone)


def held_for(lease_until: datetime | None, now: datetime | None, lease_seconds: float) -> float:
    """Seconds since a lease's holder last renewed it (taken over now): what a
    dead replica's work waited. Never below zero."""
    if lease_until is None or now is None:
        return 0.0
    renewed = (lease_until - now).total_seconds()
    return max(0.0, lease_seconds - renewed)
