"""Subscribing a channel to a session, ending it (from the channel or from the
subscriber's Home tab), and the channel's own `list` of what it follows.

These are the steps that touch the database, Slack and Together together;
`bot.commands.subscriptions` holds the database steps they are made of.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncSession

from bot import rendering
from bot.commands.as_poll import AsPoll
from bot.commands.asker import Asker, Sessionmaker
from bot.commands.subscriptions import Subscribed, fetch_for_user, subscribe, unsubscribe
from bot.commands.thread import post_in_thread, refusal_logged
from bot.outbox.queue import end_subscriptions, in_flight
from bot.settings.model import Settings
from bot.slack_web import SlackWeb
from bot.store.queries.chart_subscriptions import set_chart_on_end
from bot.store.queries.routing import set_routing
from bot.store.queries.subscriptions import channel_subscriptions, set_stall, set_target
from bot.store.tables import Subscription, WatchedSession, utcnow
from bot.together.client import TogetherClient
from bot.training.sessions import TrainingSession

log = logging.getLogger(__name__)

# How long an unsubscribe waits for its rows a replica is sending right now (a
# post and a redraw, each within Slack's timeout) before it says goodbye anyway.
IN_FLIGHT_WAIT_SECONDS = 30.0
_IN_FLIGHT_CHECK_SECONDS = 0.2


async def subscribe_here(
    *,
    together: TogetherClient,
    sessionmaker: Sessionmaker,
    slack: SlackWeb,
    asker: Asker,
    session_id: str,
    first_poll_in: float,
    root_ts: str | None = None,
    filters: frozenset[str] | None = None,
    stall_minutes: int | None = None,
    target_step: int | None = None,
    as_poll: AsPoll | None = None,
    broadcast: str | None = None,
    dm: str | None = None,
    chart_on_end: bool | None = None,
) -> tuple[TrainingSession, Subscribed]:
    """Fetch the session, then subscribe this channel to it (see `subscribe`);
    `stall_minutes` (0 off) sets the thread's stall threshold, None keeps it, and
    so do `broadcast`, `dm` (an empty `dm` turns the creator's DMs off) and
    `chart_on_end` (whether the thread gets a final chart).
    `as_poll` writes the fetch as the poll of a session already watched, before
    this channel joins (its root card shows the state it subscribed at).
    Raises TogetherError or SubscriptionError, each worded for the person."""
    session = await fetch_for_user(together, session_id)
    if as_poll is not None:
        await as_poll(session)
    result = await subscribe_session(
        sessionmaker=sessionmaker,
        slack=slack,
        asker=asker,
        session=session,
        first_poll_in=first_poll_in,
        root_ts=root_ts,
        filters=filters,
        stall_minutes=stall_minutes,
        target_step=target_step,
        broadcast=broadcast,
        dm=dm,
        chart_on_end=chart_on_end,
    )
    return session, result


async def subscribe_session(
    *,
    sessionmaker: Sessionmaker,
    slack: SlackWeb,
    asker: Asker,
    session: TrainingSession,
    first_poll_in: float,
    root_ts: str | None = None,
    filters: frozenset[str] | None = None,
    stall_minutes: int | None = None,
    target_step: int | None = None,
    broadcast: str | None = None,
    dm: str | None = None,
    chart_on_end: bool | None = None,
) -> Subscribed:
    """Subscribe the asker's channel to a session already fetched: the root card,
    the thread and its options, as `subscribe` does it (a follow rule's discovery
    comes here with the session as listed)."""

    async def configure(db: AsyncSession, subscription_id: int) -> None:
        if chart_on_end is not None:
            await set_chart_on_end(db, subscription_id, chart_on_end)
        if stall_minutes is not None:
            await set_stall(db, subscription_id, stall_minutes)
        if target_step is not None:
            await set_target(db, subscription_id, target_step)
        await set_routing(db, subscription_id, broadcast=broadcast, dm=dm)

    options = (stall_minutes, target_step, broadcast, dm, chart_on_end)
    return await subscribe(
        sessionmaker=sessionmaker,
        slack=slack,
        session=session,
        team_id=asker.team_id,
        channel_id=asker.channel_id,
        user_id=asker.user_id,
        first_poll_in=first_poll_in,
        root_ts=root_ts,
        filters=filters,
        # in the subscription's own transaction: nobody reads it without them
        configure=configure if any(v is not None for v in options) else None,
    )


def first_poll_seconds(settings: Settings) -> float:
    """When a new subscription's session is first polled: at the shortest interval the
    budget may give (POLL_MIN_INTERVAL_SECONDS, or POLL_INTERVAL_SECONDS if that is
    shorter), so a change right after subscribing is told within seconds, whatever
    interval the poller is on. It then keeps the interval in use."""
    return min(settings.poll_min_interval_seconds, settings.poll_interval_seconds)


async def unsubscribe_here(
    *, sessionmaker: Sessionmaker, slack: SlackWeb, asker: Asker, session_id: str
) -> Subscription | None:
    """End this channel's subscription, say so in its thread, turn its root back.
    None when the channel was not subscribed."""
    async with sessionmaker() as db, db.begin():
        sub = await unsubscribe(
            db=db,
            team_id=asker.team_id,
            channel_id=asker.channel_id,
            session_id=session_id,
            user_id=asker.user_id,
        )
    if sub is not None:
        await _announce_unsubscribed(
            sessionmaker=sessionmaker, slack=slack, sub=sub, user_id=asker.user_id
        )
    return sub


async def unsubscribe_from_home(
    *, sessionmaker: Sessionmaker, slack: SlackWeb, subscription_id: int, user_id: str
) -> Subscription | None:
    """End a subscription from its subscriber's Home tab; None (and nothing
    changed) unless it is active and `user_id` is the one who subscribed."""
    async with sessionmaker() as db, db.begin():
        sub = await db.get(Subscription, subscription_id)
        if sub is None or not sub.active or sub.subscribed_by != user_id:
            return None
        await end_subscriptions(db, [sub.id], reason=f"unsubscribed by {user_id}")
    await _announce_unsubscribed(sessionmaker=sessionmaker, slack=slack, sub=sub, user_id=user_id)
    return sub


async def _announce_unsubscribed(
    *, sessionmaker: Sessionmaker, slack: SlackWeb, sub: Subscription, user_id: str
) -> None:
    """Say so in the thread and turn the root's button back into Subscribe, once
    nothing of the subscription is in flight: so nothing follows the goodbye and
    the card's last redraw is this one."""
    await _in_flight_done(sessionmaker, sub)
    message = rendering.unsubscribed_message(user_id)
    await post_in_thread(slack, sub.channel_id, sub.root_ts, message)
    async with sessionmaker() as db:
        watch = await db.get(WatchedSession, sub.session_id)
    if watch is None or not watch.snapshot:
        return
    card = rendering.card(TrainingSession.model_validate(watch.snapshot), subscribed=False)
    with refusal_logged("turn the root card back", sub.channel_id):
        await slack.update(
            channel=sub.channel_id, ts=sub.root_ts, text=card["text"], blocks=card["blocks"]
        )


async def _in_flight_done(sessionmaker: Sessionmaker, sub: Subscription) -> None:
    """Wait until no replica is sending one of the subscription's rows (cancelled
    with it, but perhaps already on its way to Slack), IN_FLIGHT_WAIT_SECONDS at most."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + IN_FLIGHT_WAIT_SECONDS
    while True:
        async with sessionmaker() as db:
            if not await in_flight(db, sub.id):
                return
        if loop.time() >= deadline:
            log.warning(
                "a delivery is still in flight; saying unsubscribed anyway",
                extra={"channel_id": sub.channel_id, "session_id": sub.session_id},
            )
            return
        await asyncio.sleep(_IN_FLIGHT_CHECK_SECONDS)


async def listed_here(
    *, sessionmaker: Sessionmaker, asker: Asker
) -> list[rendering.ListedSubscription]:
    """The asker's channel's subscriptions with their last status, filters, mute
    and the options each thread was given."""
    async with sessionmaker() as db:
        rows = await channel_subscriptions(
            db=db, team_id=asker.team_id, channel_id=asker.channel_id
        )
    now = utcnow()
    return [
        rendering.ListedSubscription(
            sub.session_id,
            display_name(watch),
            watch.last_status if watch else None,
            filters=sub.filter_set,
            muted_until=sub.muted_until if sub.muted_until and sub.muted_until > now else None,
            options=thread_options(sub),
        )
        for sub, watch in rows
    ]


def thread_options(sub: Subscription) -> tuple[str, ...]:
    """The options a thread was given, written as `subscribe` takes them, so a
    person can see why a thread behaves as it does and repeat it elsewhere. An
    option left at the bot's default is not shown."""
    options = []
    if sub.stall_after_minutes is not None:
        minutes = sub.stall_after_minutes
        options.append("stall=off" if minutes == 0 else f"stall={minutes}m")
    if sub.target_step is not None:
        options.append(f"target={sub.target_step}")
    if sub.broadcast:
        options.append(f"broadcast={sub.broadcast}")
    if sub.dm:
        options.append(f"dm={sub.dm}")
    if not sub.chart_on_end:
        options.append("chart=off")
    return tuple(options)


def display_name(watch: WatchedSession | None) -> str | None:
    """The display name in a watch's stored snapshot, if any."""
    name = (watch.snapshot or {}).get("display_name") if watch else None
    return name if isinstance(name, str) else None
