"""Queries on a channel's own settings (its digest time and time zone)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.tables import ChannelSettings, utcnow


async def set_digest(
    *,
    db: AsyncSession,
    team_id: str,
    channel_id: str,
    user_id: str,
    at: str | None,
    tz: str,
) -> None:
    """Set (or with None, clear) the channel's daily digest time."""
    settings = await db.get(ChannelSettings, (team_id, channel_id))
    if settings is None:
        settings = ChannelSettings(team_id=team_id, channel_id=channel_id)
        db.add(settings)
    settings.digest_time, settings.digest_tz = at, tz
    settings.updated_by, settings.updated_at = user_id, utcnow()


async def digest_settings(db: AsyncSession) -> list[ChannelSettings]:
    """The channels that asked for a digest, locked (skipping those another replica
    is sending now), so a digest is queued once a day."""
    rows = await db.execute(
        select(ChannelSettings)
        .where(ChannelSettings.digest_time.is_not(None))
        .with_for_update(skip_locked=True)
    )
    return list(rows.scalars())
