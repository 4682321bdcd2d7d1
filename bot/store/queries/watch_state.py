"""Queries on a watched session's stored state: the poller's writes under its
lease, and what the watches and charts read of it.

Poll results are written only for sessions whose lease this replica still holds
by the database's clock, and those rows are locked until the commit, so no
claim can take them while their poll is being written.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, Table, and_, bindparam, select, update

from bot.store.leases import HANDED_BACK
from bot.store.session import Db, WideRow
from bot.store.tables import WatchedSession, db_now
from bot.training.poll_progress import PollProgress
from bot.training.snapshots import SessionSnapshot


async def held_states(db: Db, session_ids: Sequence[str], *, owner: str) -> Sequence[WideRow]:
    """The stored state of those of these sessions `owner` still leases, locked
    until the commit; each row also holds the database's now (`db_now`)."""
    return (
        await db.execute(
            select(
                WatchedSession.session_id,
                WatchedSession.last_status,
                WatchedSession.transition_seq,
                WatchedSession.consecutive_failures,
                WatchedSession.checkpoint_keys,
                WatchedSession.not_found_since,
                WatchedSession.progress,
                WatchedSession.active,
                WatchedSession.write_failures,
                WatchedSession.last_failure,
                WatchedSession.fingerprint,
                db_now().label("db_now"),
            )
            .where(
                WatchedSession.session_id.in_(list(session_ids)),
                WatchedSession.lease_owner == owner,
                WatchedSession.lease_until > db_now(),
            )
            .with_for_update(of=WatchedSession)
        )
    ).all()


async def write_states(db: Db, updates: Mapping[str, dict[str, Any]], *, owner: str) -> None:
    """Write each session's columns and hand back its lease, only where this
    replica still holds it: one executemany per set of columns (an executemany
    needs the same columns in every row)."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for session_id, values in updates.items():
        groups[tuple(sorted(values))].append({"b_id": session_id} | values)
    table = WatchedSession.__table__
    assert isinstance(table, Table)
    for columns, params in groups.items():
        stmt = (
            update(table)
            .where(and_(table.c.session_id == bindparam("b_id"), table.c.lease_owner == owner))
            .values({c: bindparam(c) for c in columns} | HANDED_BACK | {"updated_at": db_now()})
        )
        await db.execute(stmt, params)


async def snapshots(db: Db, session_ids: Sequence[str]) -> dict[str, SessionSnapshot | None]:
    """The stored snapshots of these sessions, by session."""
    rows = await db.execute(
        select(WatchedSession.session_id, WatchedSession.snapshot).where(
            WatchedSession.session_id.in_(list(session_ids))
        )
    )
    return {r.session_id: r.snapshot for r in rows}


async def held_write_failures(
    db: Db, session_id: str, *, owner: str
) -> Row[int, int, datetime] | None:
    """A session `owner` leases, locked: its `write_failures`, `transition_seq` and
    the database's now (`db_now`); None when another holds it."""
    return (
        await db.execute(
            select(
                WatchedSession.write_failures,
                WatchedSession.transition_seq,
                db_now().label("db_now"),
            )
            .where(
                WatchedSession.session_id == session_id,
                WatchedSession.lease_owner == owner,
            )
            .with_for_update(of=WatchedSession)
        )
    ).first()


async def set_watch(db: Db, session_id: str, values: Mapping[str, Any]) -> None:
    """Write these columns of one watched session."""
    await db.execute(
        update(WatchedSession)
        .where(WatchedSession.session_id == session_id)
        .values(**values)
        .execution_options(synchronize_session=False)
    )


async def snapshot_of(db: Db, session_id: str) -> SessionSnapshot | None:
    """The stored snapshot of one session (None when it is not watched)."""
    found = await db.execute(
        select(WatchedSession.snapshot).where(WatchedSession.session_id == session_id)
    )
    return found.scalar_one_or_none()


async def progress_now(db: Db, session_id: str) -> Row[PollProgress | None, datetime] | None:
    """One session's stored `progress`, with the database's now (`now`); None when
    it is not watched."""
    return (
        await db.execute(
            select(WatchedSession.progress, db_now().label("now")).where(
                WatchedSession.session_id == session_id
            )
        )
    ).first()


async def recently_ended(
    db: Db, *, not_in: Sequence[str], within: float, limit: int
) -> Sequence[Row[str, str, PollProgress | None, SessionSnapshot | None]]:
    """Watches no longer polled whose status is not one of `not_in`, that the poller
    last wrote within `within` seconds (`updated_at`: marks leave it alone), the
    newest first: each its `session_id`, `last_status`, `progress` and `snapshot`."""
    return (
        await db.execute(
            select(
                WatchedSession.session_id,
                WatchedSession.last_status,
                WatchedSession.progress,
                WatchedSession.snapshot,
            )
            .where(
                WatchedSession.active.is_(False),
                WatchedSession.last_status.not_in(not_in),
                WatchedSession.updated_at > db_now(-within),
            )
            .order_by(WatchedSession.updated_at.desc())
            .limit(limit)
        )
    ).all()


async def ended_progress(
    db: Db, session_ids: Sequence[str]
) -> Sequence[Row[str, PollProgress | None]]:
    """The `progress` column of those of these watches that are no longer polled."""
    rows = await db.execute(
        select(WatchedSession.session_id, WatchedSession.progress).where(
            WatchedSession.session_id.in_(list(session_ids)), WatchedSession.active.is_(False)
        )
    )
    return rows.all()


async def mark_ended_progress(db: Db, session_id: str, progress: Any) -> None:
    """Write an ended watch's progress column, leaving `updated_at` as it was."""
    await db.execute(
        update(WatchedSession)
        .where(WatchedSession.session_id == session_id, WatchedSession.active.is_(False))
        .values(progress=progress, updated_at=WatchedSession.updated_at)
        .execution_options(synchronize_session=False)
    )
