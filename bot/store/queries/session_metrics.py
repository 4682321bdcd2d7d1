"""The card's W&B reads (`session_metrics`): which sessions are due a read, the
read written back, dropped with the watch."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.chart_tables import SessionMetrics
from bot.store.tables import WatchedSession
from bot.training.metrics_view import MetricsView


async def view_of(db: AsyncSession, session_id: str) -> tuple[MetricsView, datetime | None]:
    """The last read of a session's run, and when it was made (None: never)."""
    row = await db.get(SessionMetrics, session_id)
    if row is None:
        return MetricsView(), None
    return row.view, row.read_at


async def write_view(
    db: AsyncSession, session_id: str, view: MetricsView, *, read_at: datetime
) -> None:
    row = await db.get(SessionMetrics, session_id)
    if row is None:
        db.add(SessionMetrics(session_id=session_id, read_at=read_at, view=view))
    else:
        row.read_at = read_at
        row.view = view


async def due_sessions(db: AsyncSession, *, before: datetime, limit: int) -> list[str]:
    """Active watched sessions whose run was last read before `before` (or never)."""
    rows = await db.scalars(
        select(WatchedSession.session_id)
        .outerjoin(SessionMetrics, SessionMetrics.session_id == WatchedSession.session_id)
        .where(
            WatchedSession.active.is_(True),
            (SessionMetrics.read_at.is_(None)) | (SessionMetrics.read_at < before),
        )
        .order_by(SessionMetrics.read_at.nulls_first(), WatchedSession.session_id)
        .limit(limit)
    )
    return list(rows)
