"""The personal switch "Tell me about my sessions": who turned it on, and the
sessions it took for them (`personal_alerts`, `personal_watches`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.engine import insert_ignoring, rows_touched, upsert
from bot.store.tables import PersonalAlerts, PersonalWatch, database_now


async def set_switch(db: AsyncSession, *, team_id: str, user_id: str, enabled: bool) -> None:
    now = await database_now(db)
    await db.execute(
        upsert(
            db,
            PersonalAlerts,
            {"user_id": user_id, "team_id": team_id, "enabled": enabled, "updated_at": now},
            key=["user_id"],
        )
    )


async def switch_on(db: AsyncSession, *, user_id: str) -> bool:
    row = await db.get(PersonalAlerts, user_id)
    return row is not None and row.enabled


async def switched_on(db: AsyncSession) -> list[str]:
    """The Slack users whose switch is on."""
    rows = await db.execute(
        select(PersonalAlerts.user_id)
        .where(PersonalAlerts.enabled.is_(True))
        .order_by(PersonalAlerts.user_id)
    )
    return list(rows.scalars())


async def take(
    db: AsyncSession, *, user_id: str, session_ids: Sequence[str], limit: int
) -> list[str]:
    """Take these sessions for a person's DMs, `limit` at most; the ones not taken
    before (by any replica)."""
    wanted = list(dict.fromkeys(session_ids))
    had = set(
        (
            await db.execute(
                select(PersonalWatch.session_id).where(
                    PersonalWatch.user_id == user_id, PersonalWatch.session_id.in_(wanted)
                )
            )
        ).scalars()
    )
    now = await database_now(db)
    taken: list[str] = []
    for session_id in (s for s in wanted if s not in had):
        if len(taken) >= limit:
            break
        result = await db.execute(
            insert_ignoring(db, PersonalWatch.__table__).values(
                user_id=user_id, session_id=session_id, created_at=now
            )
        )
        if rows_touched(result) == 1:
            taken.append(session_id)
    return taken


async def untake(db: AsyncSession, *, user_id: str, session_id: str) -> None:
    """Give a session back (it could not be watched this time): the next pass retries."""
    row = await db.get(PersonalWatch, (user_id, session_id))
    if row is not None:
        await db.delete(row)


async def listeners(db: AsyncSession, session_ids: Sequence[str]) -> dict[str, list[str]]:
    """The people to DM about each of these sessions: switch on, session taken."""
    if not session_ids:
        return {}
    rows = await db.execute(
        select(PersonalWatch.session_id, PersonalWatch.user_id)
        .join(PersonalAlerts, PersonalAlerts.user_id == PersonalWatch.user_id)
        .where(PersonalWatch.session_id.in_(list(session_ids)), PersonalAlerts.enabled.is_(True))
        .order_by(PersonalWatch.user_id)
    )
    out: dict[str, list[str]] = {}
    for row in rows:
        out.setdefault(row.session_id, []).append(row.user_id)
    return out
