"""What a channel follows, as `list` and App Home show it: its subscriptions
with the options each thread was given, and its follow rules."""

from __future__ import annotations

from bot import rendering
from bot.rendering.follow import RuleLine
from bot.store.queries.subscriptions import channel_subscriptions
from bot.store.session import Sessionmaker
from bot.store.tables import FollowRule, WatchedSession, utcnow
from bot.subscriptions.options import ThreadOptions


async def channel_listing(
    *, sessionmaker: Sessionmaker, team_id: str, channel_id: str
) -> list[rendering.ListedSubscription]:
    """A channel's subscriptions with their last status, filters, mute and the
    options each thread was given."""
    async with sessionmaker() as db:
        rows = await channel_subscriptions(db=db, team_id=team_id, channel_id=channel_id)
    now = utcnow()
    return [
        rendering.ListedSubscription(
            sub.session_id,
            display_name(watch),
            watch.last_status if watch else None,
            filters=sub.filter_set,
            muted_until=sub.muted_until if sub.muted_until and sub.muted_until > now else None,
            options=ThreadOptions.of_thread(sub).words(),
        )
        for sub, watch in rows
    ]


def display_name(watch: WatchedSession | None) -> str | None:
    """The display name in a watch's stored snapshot, if any."""
    snapshot = watch.snapshot if watch is not None else None
    return snapshot.display_name if snapshot is not None else None


def rule_line(rule: FollowRule) -> RuleLine:
    """A follow rule as `list`, App Home and discovery's messages show it."""
    return RuleLine(
        rule.channel_id,
        rule.selector,
        rule.model,
        rule.filter_set,
        rule.stall_after_minutes,
        rule.existing,
        rule.active,
        rule.ended_reason,
    )
