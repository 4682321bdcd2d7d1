"""The workspaces that refused the card's chart block (`chart_refusals`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.chart_tables import ChartRefusal
from bot.store.engine import insert_ignoring


async def remember_refusal(db: AsyncSession, team_id: str, *, error: str, now: datetime) -> None:
    """Note that `team_id` refused the chart; the first refusal is the one kept
    (another replica may note the same one at the same moment)."""
    await db.execute(
        insert_ignoring(db, ChartRefusal, conflict=["team_id"]).values(
            team_id=team_id[:32], refused_at=now, error=error[:64]
        )
    )
