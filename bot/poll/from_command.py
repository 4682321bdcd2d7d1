"""A session that a person's command has just fetched counts as that session's poll.

A subscribe, a card or a Refresh asks Together for one session with a GET, as
a poll would. If the bot watches that session, the answer is written as the
poll's state, through the same judgement and write as a poll (a change is
told in the threads, the next poll is one interval later): the poller then
spends nothing on it, and a change a person saw first is told at once.

It takes the session's lease for the write, as a poll does, and only when
nobody holds it: a poll working on the session right now tells it itself.
"""

from __future__ import annotations

from datetime import datetime

from bot.poll.isolate import store_apart
from bot.poll.leases import release
from bot.settings.model import Settings
from bot.store.leases import claim_session
from bot.store.session import Sessionmaker
from bot.training.sessions import TrainingSession


def spacing(
    next_poll_at: datetime | None, last_polled_at: datetime | None, settings: Settings
) -> float:
    """The interval a session was last given (its next poll after its last), within
    POLL_MIN_INTERVAL_SECONDS and POLL_INTERVAL_SECONDS; the shortest when it has
    not been polled yet."""
    shortest = min(settings.poll_min_interval_seconds, settings.poll_interval_seconds)
    if next_poll_at is None or last_polled_at is None:
        return shortest
    given = (next_poll_at - last_polled_at).total_seconds()
    return min(settings.poll_interval_seconds, max(shortest, given))


async def poll_from_command(
    sessionmaker: Sessionmaker,
    session: TrainingSession,
    *,
    owner: str,
    settings: Settings,
) -> int | None:
    """Write `session`, just fetched by a command, as its poll. None when the bot
    does not watch it or a poll holds it now; else the outbox rows written."""
    async with sessionmaker() as db, db.begin():
        row = await claim_session(db, session.id, owner=owner, lease_seconds=settings.lease_seconds)
    if row is None:
        return None
    try:
        _, rows = await store_apart(
            sessionmaker,
            {session.id: session},
            owner=owner,
            settings=settings,
            polled_at=row.db_now,
            interval=spacing(row.next_poll_at, row.last_polled_at, settings),
        )
    except Exception:
        await release(sessionmaker, [session.id], owner=owner)  # the poller has it next
        raise
    return rows
