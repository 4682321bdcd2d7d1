"""A session's card as a person asks for it (`show`, Refresh, after a Stop):
for a session the bot watches, with the watch section every root redraw shows,
so asking for the card never shows less than the root already does."""

from __future__ import annotations

from datetime import timedelta

from bot import rendering, root_card
from bot.alerts.stall import threshold
from bot.commands.asker import Asker, Sessionmaker
from bot.commands.subscriptions import active_subscription, stored_progress
from bot.config import Settings
from bot.rendering.blocks import Message
from bot.store.progress import CardView
from bot.store.queries.session_metrics import view_of
from bot.store.tables import utcnow
from bot.training.sessions import TrainingSession


async def watched_card(
    *,
    sessionmaker: Sessionmaker,
    settings: Settings,
    session: TrainingSession,
    asker: Asker,
    subscribed: bool = False,
) -> Message:
    """The session's card; for a session the bot watches, with the watch section
    every root redraw shows (resource and spend, steps/min, a stall, and this
    channel's own target and stall threshold when `subscribed`), so a Refresh or
    a Stop on the root card does not drop it (see `root_card.card_with_watch`)."""
    card = rendering.card(session, subscribed=subscribed)
    if session.terminal:
        return card
    async with sessionmaker() as db:
        progress = (await stored_progress(db, [session.id])).get(session.id)
        sub = (
            await active_subscription(
                db, team_id=asker.team_id, channel_id=asker.channel_id, session_id=session.id
            )
            if subscribed and progress is not None
            else None
        )
        metrics, _ = await view_of(db, session.id)
    if progress is None:
        return card
    own = sub.stall_after_minutes if sub is not None else None
    watch = root_card.CardWatch(
        CardView.of(progress),
        target=sub.target_step if sub is not None else None,
        stall_after=threshold(own, stall_threshold(settings)),
        metrics=root_card.metric_lines(metrics.dump(), settings.wandb_metrics),
    )
    return root_card.card_with_watch(card, watch, now=utcnow())


def stall_threshold(settings: Settings) -> timedelta | None:
    """STALL_AFTER_MINUTES as a duration; None when it is off. The card and the
    `ls` rows judge a stall by it."""
    minutes = settings.stall_after_minutes
    return timedelta(minutes=minutes) if minutes > 0 else None
