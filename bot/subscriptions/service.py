"""Subscribing a channel to a session, writing its thread's options, and ending
subscriptions (from the channel, from the subscriber's Home tab, or for
delivery when Slack refused a thread).

No transaction is ever open across a Slack call: `subscribe` posts the root card
between two short transactions of its own, and an unsubscribe says goodbye after
its own has committed. `end_subscriptions` takes the caller's transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from bot import rendering
from bot.outbox.queue import cancel_owed, in_flight
from bot.rendering.refusals import DM_PROBLEM, SUBSCRIBED_MEANWHILE, already_ended
from bot.settings.model import Settings
from bot.slack_web import SlackApiError, SlackWeb, error_of
from bot.store.errors import Duplicate
from bot.store.queries.subscriptions import (
    SubscribedMeanwhile,
    active_subscription,
    end_rows,
    set_chart_on_end,
    set_routing,
    set_stall,
    set_target,
    stop_orphan_watches,
    store_subscription,
    subscription_by_id,
    subscription_row,
)
from bot.store.queries.watched_sessions import start_watching, watched_session
from bot.store.session import Db, Sessionmaker
from bot.store.tables import Subscription
from bot.subscriptions.errors import CHANNEL_PROBLEMS, SubscriptionError, slack_problem
from bot.subscriptions.options import ThreadOptions, filters_text
from bot.subscriptions.redraw import redraw_card
from bot.subscriptions.thread import post_in_thread, refusal_logged
from bot.training.sessions import TrainingSession

log = logging.getLogger(__name__)


# How long an unsubscribe waits for its rows a replica is sending right now (a
# post and a redraw, each within Slack's timeout) before it says goodbye anyway.
IN_FLIGHT_WAIT_SECONDS = 30.0
_IN_FLIGHT_CHECK_SECONDS = 0.2


@dataclass(frozen=True)
class Subscribed:
    subscription_id: int
    root_ts: str
    already: bool
    filters: frozenset[str]
    filters_changed: bool = False


def first_poll_seconds(settings: Settings) -> float:
    """When a new subscription's session is first polled: at the shortest interval the
    budget may give (POLL_MIN_INTERVAL_SECONDS, or POLL_INTERVAL_SECONDS if that is
    shorter), so a change right after subscribing is told within seconds, whatever
    interval the poller is on. It then keeps the interval in use."""
    return min(settings.poll_min_interval_seconds, settings.poll_interval_seconds)


async def subscribe(
    *,
    sessionmaker: Sessionmaker,
    slack: SlackWeb,
    session: TrainingSession,
    team_id: str,
    channel_id: str,
    user_id: str,
    first_poll_in: float,
    options: ThreadOptions,
    root_ts: str | None = None,
) -> Subscribed:
    """Post (or adopt, `root_ts`) the root card, then store the subscription, its
    thread's options and its watch in one transaction, so nobody reads a new
    subscription without its options.

    Subscribing again is idempotent, and is how a channel changes its filters and
    options (`filters` None, as from a button, keeps the channel's). No
    transaction is open while Slack is called: the lookup and the store are two
    short ones, and a replica that stored the same subscription in between is
    caught by the unique key."""
    if channel_id.startswith("D"):
        raise SubscriptionError(DM_PROBLEM)
    async with sessionmaker() as db, db.begin():
        existing = await subscription_row(db, team_id, channel_id, session.id)
        if existing is not None and existing.active:
            wanted = existing.filter_set if options.filters is None else options.filters
            changed = existing.filter_set != wanted
            if changed:
                existing.filters = filters_text(wanted)
            await _write_options(db, existing.id, options)
            if options.sets_thread or changed:
                await redraw_card(
                    db,
                    team_id=team_id,
                    channel_id=channel_id,
                    session_id=session.id,
                    what="options",
                )
            return Subscribed(
                existing.id, existing.root_ts, already=True, filters=wanted, filters_changed=changed
            )
    if session.terminal:
        raise SubscriptionError(already_ended(rendering.status_words(session.status)))
    wanted = options.chosen_filters
    card = rendering.card(session, subscribed=True)
    root = await _root_message(slack, channel_id, card, root_ts)
    try:
        async with sessionmaker() as db, db.begin():
            sub_id = await store_subscription(
                db,
                team_id=team_id,
                channel_id=channel_id,
                session_id=session.id,
                root=root,
                user_id=user_id,
                filters=filters_text(wanted),
            )
            await start_watching(db, session, first_poll_in=first_poll_in)
            await _write_options(db, sub_id, options)
    except (Duplicate, SubscribedMeanwhile) as exc:
        # Another replica (or a double click) stored the same subscription while
        # we posted: keep its root, take back ours (unless we adopted the clicked card).
        await _take_back(slack, channel_id, root, root_ts)
        raise SubscriptionError(SUBSCRIBED_MEANWHILE) from exc
    except Exception:
        # Nothing was stored (the database refused the row or went away): a card
        # left up would be a subscription nobody keeps, and a retry would post another.
        await _take_back(slack, channel_id, root, root_ts)
        raise
    return Subscribed(sub_id, root, already=False, filters=wanted)


async def _write_options(db: Db, subscription_id: int, options: ThreadOptions) -> None:
    """Write the thread's options that were given; the others stay as they are."""
    if not options.sets_thread:
        return
    if options.chart_on_end is not None:
        await set_chart_on_end(db, subscription_id, options.chart_on_end)
    if options.stall_after_minutes is not None:
        await set_stall(db, subscription_id, options.stall_after_minutes)
    if options.target_step is not None:
        await set_target(db, subscription_id, options.target_step)
    await set_routing(db, subscription_id, broadcast=options.broadcast, dm=options.dm)


async def _take_back(slack: SlackWeb, channel_id: str, root: str, root_ts: str | None) -> None:
    """Delete the root card this attempt posted (not the clicked card it adopted)."""
    if root != root_ts:
        with contextlib.suppress(SlackApiError, OSError, TimeoutError):
            await slack.delete(channel=channel_id, ts=root)


async def _root_message(
    slack: SlackWeb, channel_id: str, card: rendering.Message, root_ts: str | None
) -> str:
    try:
        if root_ts:
            try:
                await slack.update(
                    channel=channel_id, ts=root_ts, text=card["text"], blocks=card["blocks"]
                )
                return root_ts
            except SlackApiError as exc:
                if error_of(exc) in CHANNEL_PROBLEMS:
                    raise
                log.info(
                    "cannot adopt the clicked card as root (%s); posting a new one",
                    error_of(exc),
                )
        response = await slack.post(
            channel=channel_id,
            text=card["text"],
            blocks=card["blocks"],
            unfurl_links=False,
            unfurl_media=False,
        )
        return str(response["ts"])
    except SlackApiError as exc:
        raise SubscriptionError(slack_problem(exc)) from exc


async def end_subscriptions(db: Db, ids: list[int], *, reason: str) -> None:
    """End subscriptions, drop what they still owe, and stop polling orphaned sessions.
    (A session that ends ends its subscriptions itself, keeping their last rows:
    `SESSION_ENDED`.)"""
    if not ids:
        return
    await end_rows(db, ids, reason=reason)
    await cancel_owed(db, ids)
    await stop_orphan_watches(db, ids)


async def unsubscribe(
    *,
    sessionmaker: Sessionmaker,
    slack: SlackWeb,
    team_id: str,
    channel_id: str,
    session_id: str,
    user_id: str,
) -> Subscription | None:
    """End this channel's subscription, say so in its thread, turn its root back.
    None when the channel was not subscribed."""
    async with sessionmaker() as db, db.begin():
        sub = await active_subscription(
            db, team_id=team_id, channel_id=channel_id, session_id=session_id
        )
        if sub is not None:
            await end_subscriptions(db, [sub.id], reason=f"unsubscribed by {user_id}")
    if sub is not None:
        await _announce_unsubscribed(
            sessionmaker=sessionmaker, slack=slack, sub=sub, user_id=user_id
        )
    return sub


async def unsubscribe_from_home(
    *, sessionmaker: Sessionmaker, slack: SlackWeb, subscription_id: int, user_id: str
) -> Subscription | None:
    """End a subscription from its subscriber's Home tab; None (and nothing
    changed) unless it is active and `user_id` is the one who subscribed."""
    async with sessionmaker() as db, db.begin():
        sub = await subscription_by_id(db, subscription_id)
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
        watch = await watched_session(db, sub.session_id)
    if watch is None or watch.snapshot is None:
        return
    card = rendering.card(watch.snapshot, subscribed=False)
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
