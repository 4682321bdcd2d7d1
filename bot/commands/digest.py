"""`digest`: a channel's daily summary of the sessions it follows, set or stopped.
Digests live with a channel's subscriptions, so a direct message has none."""

from __future__ import annotations

from bot.commands.asker import Asker, Sessionmaker
from bot.rendering.refusals import DM_PROBLEM
from bot.store.queries.channel_settings import set_digest
from bot.subscriptions.errors import SubscriptionError


async def digest_here(*, sessionmaker: Sessionmaker, asker: Asker, at: str | None, tz: str) -> None:
    """Set (or, with `at=None`, stop) the asker's channel's daily digest."""
    if asker.channel_id.startswith("D"):
        raise SubscriptionError(DM_PROBLEM)
    async with sessionmaker() as db, db.begin():
        await set_digest(
            db=db,
            team_id=asker.team_id,
            channel_id=asker.channel_id,
            user_id=asker.user_id,
            at=at,
            tz=tz,
        )
