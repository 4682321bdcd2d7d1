"""App Home: a person's own tab, with their subscriptions across channels and
the watched sessions they created (Together user ids mapped to theirs through
CREATED_BY_USER_MAP)."""

from __future__ import annotations

import logging

from bot import rendering
from bot.commands.asker import Sessionmaker
from bot.commands.follow import home_follow
from bot.rendering.blocks import MAX_BLOCKS
from bot.rendering.follow import home_blocks
from bot.slack_web import SlackApiError, SlackWeb
from bot.store.queries.subscriptions import user_subscriptions
from bot.store.queries.watched_sessions import created_watches
from bot.subscriptions.listing import display_name

log = logging.getLogger(__name__)


async def publish_home(
    *,
    sessionmaker: Sessionmaker,
    slack: SlackWeb,
    created_by_user_map: dict[str, str],
    user_id: str,
) -> None:
    """Publish a person's Home tab: their subscriptions across channels, the
    watched sessions they created (Together user ids mapped to theirs), their
    "Tell me about my sessions" switch and their follow rules."""
    if not user_id:
        return
    mine = [
        together_id for together_id, slack_id in created_by_user_map.items() if slack_id == user_id
    ]
    async with sessionmaker() as db:
        subscriptions = await user_subscriptions(db, user_id=user_id)
        created = await created_watches(db, created_by=mine) if mine else []
    view = rendering.home_view(
        [
            rendering.HomeSubscription(
                sub.id,
                sub.channel_id,
                sub.session_id,
                display_name(watch),
                watch.last_status if watch else None,
            )
            for sub, watch in subscriptions
        ],
        [rendering.SessionLine(w.session_id, display_name(w), w.last_status) for w in created],
    )
    rules, switch_on = await home_follow(sessionmaker=sessionmaker, user_id=user_id)
    extra = home_blocks(rules, switch_on=switch_on, mapped=bool(mine))
    # the switch first: it is the part a person acts on, and must survive the block limit
    view["blocks"] = [*extra[:MAX_BLOCKS], *view["blocks"]][:MAX_BLOCKS]
    try:
        await slack.publish_home(user_id=user_id, view=view)
    except SlackApiError as exc:
        log.warning("views.publish failed: %s", exc.response.get("error"))
