"""Queries on watched sessions: what the poller last saw of each session.

A watched session is shared by every channel subscribed to it, so it is started
once (the first subscribe) and restarted from what Together says now when a
stopped watch is taken up again.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import delete, exists, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.engine import insert_ignoring, rows_touched
from bot.store.tables import WatchedSession, utcnow
from bot.training.poll_progress import PollProgress
from bot.training.sessions import TrainingSession
from bot.training.snapshots import seen_state


async def start_watching(
    db: AsyncSession, session: TrainingSession, *, first_poll_in: float
) -> None:
    """Start (or restart) polling a session from what Together says now; its first
    poll is due `first_poll_in` seconds from now."""
    now = utcnow()
    values = seen_state(session) | {
        "next_poll_at": now + timedelta(seconds=first_poll_in),
        "active": True,
        "consecutive_failures": 0,
    }
    await db.execute(
        insert_ignoring(db, WatchedSession, conflict=["session_id"]).values(
            session_id=session.id, transition_seq=0, updated_at=now, **values
        )
    )
    # A watch that had stopped is restarted from now, so a stale status is
    # never told as if it just happened. A live one is left to the poller.
    await db.execute(
        update(WatchedSession)
        .where(WatchedSession.session_id == session.id, WatchedSession.active.is_(False))
        .values(updated_at=now, **values)
        .execution_options(synchronize_session=False)
    )


async def created_watches(db: AsyncSession, *, created_by: list[str]) -> list[WatchedSession]:
    """Watched sessions that one of these Together users created."""
    wanted = set(created_by)
    watches = await db.execute(select(WatchedSession).where(WatchedSession.active.is_(True)))
    return [w for w in watches.scalars() if w.snapshot and w.snapshot.created_by in wanted]


async def stored_progress(db: AsyncSession, session_ids: list[str]) -> dict[str, PollProgress]:
    """The progress column of those of these sessions the bot watches."""
    rows = await db.execute(
        select(WatchedSession.session_id, WatchedSession.progress).where(
            WatchedSession.session_id.in_(session_ids)
        )
    )
    return {r.session_id: r.progress for r in rows if r.progress is not None}


async def watched_session(db: AsyncSession, session_id: str) -> WatchedSession | None:
    return await db.get(WatchedSession, session_id)


async def drop_unwatched_rows(db: AsyncSession, table: Any) -> int:
    """Delete the rows of a per-session table (`session_id`) whose session is no
    longer watched: its chart points, W&B reads, a person's switch; how many."""
    return rows_touched(
        await db.execute(
            delete(table)
            .where(~exists().where(WatchedSession.session_id == table.session_id))
            .execution_options(synchronize_session=False)
        )
    )
