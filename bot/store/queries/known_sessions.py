"""Whether the store already knows a session by this id: a word a person typed
is then that id, with no request to Together to tell an id from a name."""

from __future__ import annotations

from sqlalchemy import exists, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.rule_tables import Budget, MetricRule
from bot.store.tables import Subscription, WatchedSession


async def known_session(
    db: AsyncSession, *, team_id: str, channel_id: str, session_id: str
) -> bool:
    """The bot watches the session, or this channel has (or had) a subscription,
    a metric rule or a budget naming it."""
    here = (Subscription, MetricRule, Budget)
    found = select(
        or_(
            exists().where(WatchedSession.session_id == session_id),
            *(
                exists().where(
                    table.team_id == team_id,
                    table.channel_id == channel_id,
                    table.session_id == session_id,
                )
                for table in here
            ),
        )
    )
    return bool(await db.scalar(found))
