"""Stop session and Stop resource: one allowlist (STOP_ALLOWED_USER_IDS,
STOP_ALLOWED_USERGROUP) decides who may ask Together to stop either, every
refusal and every stop is logged with who asked, and the thread (or the clicked
message) is told who did it. Slack has already shown the confirm dialog."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from bot import rendering
from bot.commands.asker import Asker, Sessionmaker
from bot.commands.deps import CommandDeps
from bot.rendering import watch as rendering_watch
from bot.rendering.refusals import (
    AllowlistRefusal,
    Thing,
    allowlist_refusal,
    stop_not_sent,
    stop_not_taken,
    stop_refused,
    stop_unknown,
)
from bot.rendering.replies import resource_stop_accepted_message, stop_accepted_message
from bot.settings.model import Settings
from bot.slack_web import SlackApiError, SlackWeb
from bot.store.errors import DatabaseError
from bot.store.queries.subscriptions import active_subscription
from bot.store.tables import Subscription
from bot.subscriptions.thread import post_in_thread
from bot.together.errors import TogetherError
from bot.training.sessions import TrainingSession

log = logging.getLogger(__name__)
_T = TypeVar("_T")


@dataclass(frozen=True)
class StopRequest:
    """What a Stop click did: refused (why), or asked Together (its answer:
    the session, or None when Together accepted the stop but its state is not
    known yet)."""

    refusal: str | None = None
    session: TrainingSession | None = None
    said: rendering.Message | None = None  # who stopped it, for the thread
    said_in_thread: bool = False


async def may_stop(*, settings: Settings, slack: SlackWeb, user_id: str) -> AllowlistRefusal | None:
    """None when the user may stop sessions, else why they may not (Download
    and Keep alive word it for themselves)."""
    if not settings.stop_allowed_user_ids and not settings.stop_allowed_usergroup:
        return AllowlistRefusal.NOT_CONFIGURED
    if user_id in settings.stop_allowed_user_ids:
        return None
    if settings.stop_allowed_usergroup:
        try:
            members = await slack.usergroup_members(usergroup=settings.stop_allowed_usergroup)
        except SlackApiError as exc:
            log.error("cannot read the stop user group: %s", exc.response.get("error"))
            return AllowlistRefusal.GROUP_UNREADABLE
        users = members.get("users")
        # Only a list names members: `in` on a string would match part of an id.
        if isinstance(users, list) and user_id in users:
            return None
    return AllowlistRefusal.NOT_ALLOWED


async def stop_session(
    deps: CommandDeps, *, asker: Asker, session_id: str, message_ts: str | None
) -> StopRequest:
    """Check who asks, ask Together to stop the session, and say who did in the
    subscription's thread (else under the clicked card). Slack has already shown
    the confirm dialog. A TogetherError (not accepted) is logged and raised
    (`stop_failed` words it)."""
    settings, together, slack = deps.settings, deps.together, deps.slack
    user_id, channel_id = asker.user_id, asker.channel_id
    who = {"user_id": user_id, "session_id": session_id, "channel_id": channel_id}
    refusal = await _may_stop_logged(settings, slack, user_id, "stop", who)
    if refusal is not None:
        return StopRequest(refusal=refusal)
    session = await _stop_logged(together.stop_session(session_id), "stop", who)
    status = session.status if session is not None else None
    log.info("session stop requested", extra=who | {"together_status": status})
    sub = await _subscription(deps.sessionmaker, asker, session_id)
    thread = sub.root_ts if sub is not None else message_ts
    if session is not None:
        message = rendering.stop_requested_message(user_id, session)
    else:
        message = stop_accepted_message(user_id, session_id, subscribed=sub is not None)
    posted = await post_in_thread(
        slack, channel_id, thread, message, what="say who stopped the session"
    )
    return StopRequest(session=session, said=message, said_in_thread=posted)


@dataclass(frozen=True)
class ResourceStop:
    """What a Stop resource click did: refused (why), or Together's answer."""

    refusal: str | None = None
    said: rendering.Message | None = None


async def stop_resource(
    deps: CommandDeps, *, asker: Asker, resource_id: str, message_ts: str | None
) -> ResourceStop:
    """The same allowlist as Stop session, then ask Together to stop the model
    resource (never `force`: a resource with an active session stays up, and
    Together says why); say who did under the clicked alert, and log it. A
    TogetherError (not accepted) is logged and raised (`stop_failed` words it)."""
    settings, together, slack = deps.settings, deps.together, deps.slack
    user_id, channel_id = asker.user_id, asker.channel_id
    who = {"user_id": user_id, "model_resources_id": resource_id, "channel_id": channel_id}
    refusal = await _may_stop_logged(settings, slack, user_id, "resource stop", who)
    if refusal is not None:
        return ResourceStop(refusal=refusal)
    resource = await _stop_logged(together.stop_model_resource(resource_id), "resource stop", who)
    status = resource.status if resource is not None else None
    log.info("model resource stop requested", extra=who | {"together_status": status})
    if resource is not None:
        message = rendering_watch.resource_stop_requested_message(user_id, resource)
    else:
        message = resource_stop_accepted_message(user_id, resource_id)
    await post_in_thread(
        slack, channel_id, message_ts, message, what="say who stopped the resource"
    )
    return ResourceStop(said=message)


# HTTP statuses that say the request was not taken at all (a gateway's 404
# page, a request timeout, too early): not stopped, and not Together's refusal.
_NOT_TAKEN = frozenset({404, 408, 425})


def stop_failed(exc: TogetherError, thing: Thing, thing_id: str) -> tuple[str, str]:
    """What a stop Together did not accept tells the person, and its outcome
    label: not stopped and why (Together refused, or never took the request),
    or not known (no answer in time, a server error: it may have stopped)."""
    status = exc.status
    if exc.kind in ("not_found", "auth", "rate_limited", "invalid_id"):
        return exc.kind, stop_not_sent(thing, exc.kind, exc.user_message)
    if status is not None and 400 <= status < 500 and status not in _NOT_TAKEN:
        return "refused", stop_refused(thing, exc.together_message, status)
    if status is not None and status < 500:  # a redirect, or a request not taken
        return exc.kind, stop_not_taken(thing, status)
    # timed out, or the connection broke (no status): it may have arrived
    return exc.kind, stop_unknown(thing, thing_id, status)


async def _subscription(
    sessionmaker: Sessionmaker, asker: Asker, session_id: str
) -> Subscription | None:
    """This channel's subscription, whose thread hears of the stop. Together has
    already stopped the session, so a database failure here is logged, not
    raised: the person still hears of the stop, under the clicked card."""
    try:
        async with sessionmaker() as db:
            return await active_subscription(
                db, team_id=asker.team_id, channel_id=asker.channel_id, session_id=session_id
            )
    except DatabaseError:
        where = {"session_id": session_id, "channel_id": asker.channel_id}
        log.exception("cannot read the subscription to tell of a stop", extra=where)
        return None


async def _may_stop_logged(
    settings: Settings, slack: SlackWeb, user_id: str, what: str, who: dict[str, Any]
) -> str | None:
    """`may_stop`, with a refusal logged as `<what> refused`; the refusal in words."""
    refusal = await may_stop(settings=settings, slack=slack, user_id=user_id)
    if refusal is None:
        return None
    log.warning("%s refused", what, extra=who)
    return allowlist_refusal(refusal, "stop")


async def _stop_logged(stop: Awaitable[_T], what: str, who: dict[str, Any]) -> _T:
    """Together's answer to a stop call; a TogetherError is logged as `<what> failed` and raised."""
    try:
        return await stop
    except TogetherError as exc:
        log.warning("%s failed: %s", what, exc, extra=who | {"together": exc.kind})
        raise
