"""A session's card as a person asks for it (`show`, Refresh, after a Stop):
for a session the bot watches, with the watch section every root redraw shows,
so asking for the card never shows less than the root already does; and on
every card, watched or not, the resource line (status, GPUs, replicas, expiry,
price), from one resource read shared with the spend watch's."""

from __future__ import annotations

import logging
from datetime import timedelta

from bot import rendering
from bot.alerts.stall import threshold
from bot.commands.asker import Asker
from bot.commands.deps import CommandDeps
from bot.rendering import root_card
from bot.rendering.blocks import Message
from bot.rendering.resource_line import with_resource_line
from bot.settings.model import Settings
from bot.store.queries.budgets import card_budget
from bot.store.queries.session_metrics import view_of
from bot.store.queries.subscriptions import active_subscription
from bot.store.queries.watched_sessions import stored_progress
from bot.store.tables import utcnow
from bot.together.errors import TogetherError
from bot.together.resource_cache import ResourceCache
from bot.training.poll_progress import CardView
from bot.training.sessions import TrainingSession, is_session_id

log = logging.getLogger(__name__)


async def watched_card(
    deps: CommandDeps,
    *,
    session: TrainingSession,
    asker: Asker,
    subscribed: bool = False,
    resources: ResourceCache | None = None,
) -> Message:
    """The session's card; for a session the bot watches, with the watch section
    every root redraw shows (resource and spend, steps/min, a stall, and this
    channel's own target and stall threshold when `subscribed`), so a Refresh or
    a Stop on the root card does not drop it (see `root_card.card_with_extras`).
    With `resources`, a card whose watch shows no resource gets the resource line."""
    sessionmaker, settings = deps.sessionmaker, deps.settings
    card = rendering.card(session, subscribed=subscribed)
    async with sessionmaker() as db:
        progress = (await stored_progress(db, [session.id])).get(session.id)
        sub = (
            await active_subscription(
                db, team_id=asker.team_id, channel_id=asker.channel_id, session_id=session.id
            )
            if subscribed and progress is not None and not session.terminal
            else None
        )
        metrics, _ = await view_of(db, session.id)
        budget = await card_budget(
            db, team_id=asker.team_id, channel_id=asker.channel_id, session_id=session.id
        )
    if progress is not None and not session.terminal:
        own = sub.stall_after_minutes if sub is not None else None
        extras = root_card.CardExtras(
            CardView.of(progress, budget=budget.amount if budget is not None else None),
            target=sub.target_step if sub is not None else None,
            stall_after=threshold(own, stall_threshold(settings)),
            metrics=root_card.metric_lines(metrics, settings.wandb_metrics),
        )
        card = root_card.card_with_extras(card, extras, now=utcnow())
        if progress.spend is not None and progress.spend.resource is not None:
            return card  # the watch section already shows the resource
    if resources is None:
        return card
    return await card_with_resource(deps, card, session, resources)


async def card_with_resource(
    deps: CommandDeps, card: Message, session: TrainingSession, resources: ResourceCache
) -> Message:
    """The card with its resource line: the resource as the spend watch (or an
    earlier card) read it within SPEND_REFRESH_SECONDS, else one read now, and
    its price per hour. A failed read leaves the card without the line."""
    together, settings = deps.together, deps.settings
    resource_id = session.model_resources_id
    if not resource_id or not is_session_id(resource_id):
        return card
    try:
        resource = await resources.resource(
            together, resource_id, max_age=min(settings.spend_refresh_seconds, 60.0)
        )
    except TogetherError as exc:
        log.info("no resource line for a card: %s", exc.kind, extra={"session_id": session.id})
        return card
    price = await resources.price(together, resource)
    return with_resource_line(card, resource, price)


def stall_threshold(settings: Settings) -> timedelta | None:
    """STALL_AFTER_MINUTES as a duration; None when it is off. The card and the
    `ls` rows judge a stall by it."""
    minutes = settings.stall_after_minutes
    return timedelta(minutes=minutes) if minutes > 0 else None
