"""The steps the polls saw (`progress_points`): written when a step moved, read
for a progress chart, thinned past a thousand points, dropped with the watch.

Thinning keeps the newest points whole and every other older one, so a long
session's chart keeps its shape while a session's rows stay bounded whatever
its length; it runs only for a session that just went over the bound, about
once in every few hundred moves.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.chart_tables import ProgressPoint

MAX_POINTS = 1000
#: the newest points never thinned
KEEP_NEWEST = 100


async def record_steps(db: AsyncSession, steps: Mapping[str, int], *, now: datetime) -> None:
    """One point per session whose step moved at this poll; thins any that went over."""
    if not steps:
        return
    await db.execute(
        insert(ProgressPoint),
        [{"session_id": sid, "seen_at": now, "step": step} for sid, step in steps.items()],
    )
    counts = await db.execute(
        select(ProgressPoint.session_id, func.count())
        .where(ProgressPoint.session_id.in_(list(steps)))
        .group_by(ProgressPoint.session_id)
    )
    for session_id, count in counts.all():
        if count > MAX_POINTS:
            await _thin(db, session_id)


async def _thin(db: AsyncSession, session_id: str) -> None:
    ids = (
        await db.scalars(
            select(ProgressPoint.id)
            .where(ProgressPoint.session_id == session_id)
            .order_by(ProgressPoint.seen_at, ProgressPoint.id)
        )
    ).all()
    older = ids[: max(0, len(ids) - KEEP_NEWEST)]
    # every other older point, the very first kept (the chart starts where the watch did)
    dropped = [point for i, point in enumerate(older) if i % 2 == 1]
    if dropped:
        await db.execute(
            delete(ProgressPoint)
            .where(ProgressPoint.id.in_(dropped))
            .execution_options(synchronize_session=False)
        )


async def steps_of(db: AsyncSession, session_id: str) -> list[tuple[datetime, int]]:
    """A session's points, oldest first."""
    rows = await db.execute(
        select(ProgressPoint.seen_at, ProgressPoint.step)
        .where(ProgressPoint.session_id == session_id)
        .order_by(ProgressPoint.seen_at, ProgressPoint.id)
        .limit(MAX_POINTS + KEEP_NEWEST)
    )
    return [(r.seen_at, r.step) for r in rows]
