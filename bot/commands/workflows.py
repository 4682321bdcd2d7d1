"""What a person's request does beyond one table: the steps that touch the
database, Slack and Together together, shared by slash commands, card buttons
and App Home.

Each takes what it uses as keywords (the sessionmaker, the Slack and Together
clients, settings), opens its own short transactions and never holds one across
a Slack or Together call. Listeners call one of these and answer the person;
`bot.commands.subscriptions` holds the database steps they are made of.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypeVar

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot import rendering, root_card
from bot.alerts.stall import threshold
from bot.commands import ls as session_list
from bot.commands.ls import ListQuery
from bot.commands.subscriptions import (
    DM_PROBLEM,
    Subscribed,
    SubscriptionError,
    active_subscription,
    channel_subscriptions,
    created_watches,
    fetch_for_user,
    set_digest,
    set_mute,
    set_stall,
    set_target,
    stored_progress,
    subscribe,
    unsubscribe,
    user_subscriptions,
)
from bot.config import Settings
from bot.outbox.queue import end_subscriptions
from bot.rendering import watch as rendering_watch
from bot.rendering.blocks import Message
from bot.store.tables import Subscription, WatchedSession, utcnow
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.together.list_pass import Lister
from bot.training.sessions import TrainingSession

log = logging.getLogger(__name__)
_T = TypeVar("_T")

Sessionmaker = async_sessionmaker[AsyncSession]

STOP_NOT_CONFIGURED = (
    "Stopping sessions from Slack is not enabled here. An operator can allow it with "
    "`STOP_ALLOWED_USER_IDS` or `STOP_ALLOWED_USERGROUP`."
)
STOP_REFUSED = "You are not allowed to stop training sessions. Ask someone on the allowed list."


@dataclass(frozen=True)
class Asker:
    """Who asks, and the channel they ask in, as Slack signed them: a
    subscription is always the one of this channel, never one a value names."""

    team_id: str
    channel_id: str
    user_id: str


# --- subscribing and unsubscribing ----------------------------------------------------------


async def subscribe_here(
    *,
    together: TogetherClient,
    sessionmaker: Sessionmaker,
    slack: AsyncWebClient,
    asker: Asker,
    session_id: str,
    first_poll_in: float,
    root_ts: str | None = None,
    filters: frozenset[str] | None = None,
    stall_minutes: int | None = None,
    target_step: int | None = None,
) -> tuple[TrainingSession, Subscribed]:
    """Fetch the session, then subscribe this channel to it (see `subscribe`);
    `stall_minutes` (0 off) sets the thread's stall threshold, None keeps it.
    Raises TogetherError or SubscriptionError, each worded for the person."""
    session = await fetch_for_user(together, session_id)
    result = await subscribe(
        sessionmaker=sessionmaker,
        slack=slack,
        session=session,
        team_id=asker.team_id,
        channel_id=asker.channel_id,
        user_id=asker.user_id,
        first_poll_in=first_poll_in,
        root_ts=root_ts,
        filters=filters,
    )
    if stall_minutes is not None or target_step is not None:
        async with sessionmaker() as db, db.begin():
            if stall_minutes is not None:
                await set_stall(db, result.subscription_id, stall_minutes)
            if target_step is not None:
                await set_target(db, result.subscription_id, target_step)
    return session, result


def first_poll_seconds(settings: Settings) -> float:
    """When a new subscription's session is first polled: at the shortest interval the
    budget may give (POLL_MIN_INTERVAL_SECONDS, or POLL_INTERVAL_SECONDS if that is
    shorter), so a change right after subscribing is told within seconds, whatever
    interval the poller is on. It then keeps the interval in use."""
    return min(settings.poll_min_interval_seconds, settings.poll_interval_seconds)


async def unsubscribe_here(
    *, sessionmaker: Sessionmaker, slack: AsyncWebClient, asker: Asker, session_id: str
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
    *, sessionmaker: Sessionmaker, slack: AsyncWebClient, subscription_id: int, user_id: str
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
    *, sessionmaker: Sessionmaker, slack: AsyncWebClient, sub: Subscription, user_id: str
) -> None:
    """Say so in the thread and turn the root's button back into Subscribe."""
    message = rendering.unsubscribed_message(user_id)
    await post_in_thread(slack, sub.channel_id, sub.root_ts, message)
    async with sessionmaker() as db:
        watch = await db.get(WatchedSession, sub.session_id)
    if watch is None or not watch.snapshot:
        return
    card = rendering.card(TrainingSession.model_validate(watch.snapshot), subscribed=False)
    with _refusal_logged("turn the root card back", sub.channel_id):
        await slack.chat_update(
            channel=sub.channel_id, ts=sub.root_ts, text=card["text"], blocks=card["blocks"]
        )


# --- mute and digest -----------------------------------------------------------------------


@dataclass(frozen=True)
class MuteChange:
    """What a mute or unmute did; `message` was also said in the thread."""

    subscribed: bool
    message: rendering.Message | None = None  # None: unmuting a thread that was not muted


async def mute_here(
    *,
    sessionmaker: Sessionmaker,
    slack: AsyncWebClient,
    asker: Asker,
    session_id: str,
    until: datetime | None,
) -> MuteChange:
    """Mute this channel's updates of a session until `until` (None: unmute now),
    and say so in its thread; unmuting an unmuted thread is no news."""
    async with sessionmaker() as db, db.begin():
        sub, was_muted = await set_mute(
            db=db,
            team_id=asker.team_id,
            channel_id=asker.channel_id,
            session_id=session_id,
            until=until,
        )
    if sub is None:
        return MuteChange(subscribed=False)
    if until is None and not was_muted:
        return MuteChange(subscribed=True)
    message = (
        rendering.muted_message(asker.user_id, until)
        if until is not None
        else rendering.unmuted_message(asker.user_id)
    )
    await post_in_thread(slack, sub.channel_id, sub.root_ts, message)
    return MuteChange(subscribed=True, message=message)


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


# --- what a channel and a person see ----------------------------------------------------------


async def listed_here(
    *, sessionmaker: Sessionmaker, asker: Asker
) -> list[rendering.ListedSubscription]:
    """The asker's channel's subscriptions with their last status, filters and mute."""
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
        )
        for sub, watch in rows
    ]


async def publish_home(
    *,
    sessionmaker: Sessionmaker,
    slack: AsyncWebClient,
    created_by_user_map: dict[str, str],
    user_id: str,
) -> None:
    """Publish a person's Home tab: their subscriptions across channels, and
    the watched sessions they created (Together user ids mapped to theirs)."""
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
    try:
        await slack.views_publish(user_id=user_id, view=view)
    except SlackApiError as exc:
        log.warning("views.publish failed: %s", exc.response.get("error"))


def display_name(watch: WatchedSession | None) -> str | None:
    """The display name in a watch's stored snapshot, if any."""
    name = (watch.snapshot or {}).get("display_name") if watch else None
    return name if isinstance(name, str) else None


# --- stopping a session -----------------------------------------------------------------------


@dataclass(frozen=True)
class StopRequest:
    """What a Stop click did: refused (why), or asked Together (its answer)."""

    refusal: str | None = None
    session: TrainingSession | None = None
    said: rendering.Message | None = None  # who stopped it, for the thread
    said_in_thread: bool = False


async def may_stop(*, settings: Settings, slack: AsyncWebClient, user_id: str) -> str | None:
    """None when the user may stop sessions, else the reason they may not."""
    if not settings.stop_allowed_user_ids and not settings.stop_allowed_usergroup:
        return STOP_NOT_CONFIGURED
    if user_id in settings.stop_allowed_user_ids:
        return None
    if settings.stop_allowed_usergroup:
        try:
            members = await slack.usergroups_users_list(usergroup=settings.stop_allowed_usergroup)
        except SlackApiError as exc:
            log.error("cannot read the stop user group: %s", exc.response.get("error"))
            return "I could not check the allowed user group just now; try again shortly."
        if user_id in (members.get("users") or []):
            return None
    return STOP_REFUSED


async def stop_session(
    *,
    settings: Settings,
    together: TogetherClient,
    sessionmaker: Sessionmaker,
    slack: AsyncWebClient,
    asker: Asker,
    session_id: str,
    message_ts: str | None,
) -> StopRequest:
    """Check who asks, ask Together to stop the session, and say who did in the
    subscription's thread (else under the clicked card). Slack has already shown
    the confirm dialog. A TogetherError (not stopped) is logged and raised."""
    user_id, channel_id = asker.user_id, asker.channel_id
    who = {"user_id": user_id, "session_id": session_id, "channel_id": channel_id}
    refusal = await _may_stop_logged(settings, slack, user_id, "stop", who)
    if refusal is not None:
        return StopRequest(refusal=refusal)
    session = await _stop_logged(together.stop_session(session_id), "stop", who)
    log.info("session stop requested", extra=who | {"together_status": session.status})
    async with sessionmaker() as db:
        sub = await active_subscription(
            db, team_id=asker.team_id, channel_id=channel_id, session_id=session_id
        )
    thread = sub.root_ts if sub is not None else message_ts
    message = rendering.stop_requested_message(user_id, session)
    posted = await post_in_thread(
        slack, channel_id, thread, message, what="say who stopped the session"
    )
    return StopRequest(session=session, said=message, said_in_thread=posted)


async def progress_of(sessionmaker: Sessionmaker, session_ids: list[str]) -> dict[str, Any]:
    """What the bot's polls measured of these sessions (those it watches), for `ls`."""
    async with sessionmaker() as db:
        return await stored_progress(db, session_ids)


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
    if progress is None:
        return card
    own = sub.stall_after_minutes if sub is not None else None
    watch = root_card.CardWatch(
        progress,
        target=sub.target_step if sub is not None else None,
        stall_after=threshold(own, stall_threshold(settings)),
    )
    return root_card.card_with_watch(card, watch, now=utcnow())


def stall_threshold(settings: Settings) -> timedelta | None:
    """STALL_AFTER_MINUTES as a duration; None when it is off."""
    minutes = settings.stall_after_minutes
    return timedelta(minutes=minutes) if minutes > 0 else None


async def org_sessions_page(
    *,
    together: TogetherClient,
    sessionmaker: Sessionmaker,
    settings: Settings,
    query: ListQuery,
    caller: str,
    after: str | None = None,
    first_number: int = 1,
    lister: Lister | None = None,
) -> Message | str:
    """One `ls` page (the first, or the one More asks for), with what the bot's
    polls measured of the sessions it watches; the first from a fresh pass of
    `lister` (the process's own) when one covers it."""
    return await session_list.page_message(
        together,
        query,
        caller=caller,
        user_map=settings.created_by_user_map,
        now=utcnow(),
        after=after,
        first_number=first_number,
        progress_of=partial(progress_of, sessionmaker),
        stall_after=stall_threshold(settings),
        lister=lister,
    )


@dataclass(frozen=True)
class ResourceStop:
    """What a Stop resource click did: refused (why), or Together's answer."""

    refusal: str | None = None
    said: rendering.Message | None = None


async def stop_resource(
    *,
    settings: Settings,
    together: TogetherClient,
    slack: AsyncWebClient,
    asker: Asker,
    resource_id: str,
    message_ts: str | None,
) -> ResourceStop:
    """The same allowlist as Stop session, then ask Together to stop the model
    resource (never `force`: a resource with an active session stays up, and
    Together says why); say who did under the clicked alert, and log it."""
    user_id, channel_id = asker.user_id, asker.channel_id
    who = {"user_id": user_id, "model_resources_id": resource_id, "channel_id": channel_id}
    refusal = await _may_stop_logged(settings, slack, user_id, "resource stop", who)
    if refusal is not None:
        return ResourceStop(refusal=refusal)
    try:
        resource = await _stop_logged(
            together.stop_model_resource(resource_id), "resource stop", who
        )
    except TogetherError as exc:
        if exc.kind == "bad_response" and exc.status == 400:  # Together refused, and says why
            return ResourceStop(
                refusal="Together did not stop it: a session on it is still active "
                "(stop that session first)."
            )
        raise
    log.info("model resource stop requested", extra=who | {"together_status": resource.status})
    message = rendering_watch.resource_stop_requested_message(user_id, resource)
    await post_in_thread(
        slack, channel_id, message_ts, message, what="say who stopped the resource"
    )
    return ResourceStop(said=message)


async def _may_stop_logged(
    settings: Settings, slack: AsyncWebClient, user_id: str, what: str, who: dict[str, Any]
) -> str | None:
    """`may_stop`, with a refusal logged as `<what> refused`."""
    refusal = await may_stop(settings=settings, slack=slack, user_id=user_id)
    if refusal is not None:
        log.warning("%s refused", what, extra=who)
    return refusal


async def _stop_logged(stop: Awaitable[_T], what: str, who: dict[str, Any]) -> _T:
    """Together's answer to a stop call; a TogetherError is logged as `<what> failed` and raised."""
    try:
        return await stop
    except TogetherError as exc:
        log.warning("%s failed: %s", what, exc, extra=who | {"together": exc.kind})
        raise


# --- Slack ------------------------------------------------------------------------------------


async def post_in_thread(
    slack: AsyncWebClient,
    channel_id: str,
    root_ts: str | None,
    message: rendering.Message,
    *,
    what: str = "post in the thread",
) -> bool:
    """Post in a thread (None: in the channel); a refusal is logged as `could not <what>`,
    not raised. True when Slack took it."""
    with _refusal_logged(what, channel_id):
        await slack.chat_postMessage(
            channel=channel_id, thread_ts=root_ts, text=message["text"], blocks=message["blocks"]
        )
        return True
    return False


@contextlib.contextmanager
def _refusal_logged(what: str, channel_id: str) -> Iterator[None]:
    """A Slack refusal of a side message (a thread line, a card redraw) is
    logged and the request goes on: the person's own answer still matters."""
    try:
        yield
    except SlackApiError as exc:
        log.warning(
            "could not %s: %s", what, exc.response.get("error"), extra={"channel_id": channel_id}
        )
