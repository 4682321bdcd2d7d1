"""Stop session and Stop resource: one allowlist (STOP_ALLOWED_USER_IDS,
STOP_ALLOWED_USERGROUP) decides who may ask Together to stop either, every
refusal and every stop is logged with who asked, and the thread (or the clicked
message) is told who did it. Slack has already shown the confirm dialog."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from bot import rendering
from bot.commands.asker import Asker, Sessionmaker
from bot.rendering import watch as rendering_watch
from bot.rendering.text import ID_LIMIT, VALUE_LIMIT, inert, sentence, user_ref
from bot.settings.model import Settings
from bot.slack_web import SlackApiError, SlackWeb
from bot.store.errors import DatabaseError
from bot.store.queries.subscriptions import active_subscription
from bot.store.tables import Subscription
from bot.subscriptions.thread import post_in_thread
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.training.sessions import TrainingSession

log = logging.getLogger(__name__)
_T = TypeVar("_T")
Thing = Literal["session", "model resource"]

STOP_NOT_CONFIGURED = (
    "Stopping sessions from Slack is not enabled here. An operator can allow it with "
    "`STOP_ALLOWED_USER_IDS` or `STOP_ALLOWED_USERGROUP`."
)
STOP_REFUSED = "You are not allowed to stop training sessions. Ask someone on the allowed list."
ACCEPTED_UNREAD = "Together accepted the stop; its new state could not be read just now."


@dataclass(frozen=True)
class StopRequest:
    """What a Stop click did: refused (why), or asked Together (its answer:
    the session, or None when Together accepted the stop but its state is not
    known yet)."""

    refusal: str | None = None
    session: TrainingSession | None = None
    said: rendering.Message | None = None  # who stopped it, for the thread
    said_in_thread: bool = False


async def may_stop(*, settings: Settings, slack: SlackWeb, user_id: str) -> str | None:
    """None when the user may stop sessions, else the reason they may not."""
    if not settings.stop_allowed_user_ids and not settings.stop_allowed_usergroup:
        return STOP_NOT_CONFIGURED
    if user_id in settings.stop_allowed_user_ids:
        return None
    if settings.stop_allowed_usergroup:
        try:
            members = await slack.usergroup_members(usergroup=settings.stop_allowed_usergroup)
        except SlackApiError as exc:
            log.error("cannot read the stop user group: %s", exc.response.get("error"))
            return "I could not check the allowed user group just now; try again shortly."
        users = members.get("users")
        # Only a list names members: `in` on a string would match part of an id.
        if isinstance(users, list) and user_id in users:
            return None
    return STOP_REFUSED


async def stop_session(
    *,
    settings: Settings,
    together: TogetherClient,
    sessionmaker: Sessionmaker,
    slack: SlackWeb,
    asker: Asker,
    session_id: str,
    message_ts: str | None,
) -> StopRequest:
    """Check who asks, ask Together to stop the session, and say who did in the
    subscription's thread (else under the clicked card). Slack has already shown
    the confirm dialog. A TogetherError (not accepted) is logged and raised
    (`stop_failed` words it)."""
    user_id, channel_id = asker.user_id, asker.channel_id
    who = {"user_id": user_id, "session_id": session_id, "channel_id": channel_id}
    refusal = await _may_stop_logged(settings, slack, user_id, "stop", who)
    if refusal is not None:
        return StopRequest(refusal=refusal)
    session = await _stop_logged(together.stop_session(session_id), "stop", who)
    status = session.status if session is not None else None
    log.info("session stop requested", extra=who | {"together_status": status})
    sub = await _subscription(sessionmaker, asker, session_id)
    thread = sub.root_ts if sub is not None else message_ts
    if session is not None:
        message = rendering.stop_requested_message(user_id, session)
    else:
        message = _stop_accepted_message(user_id, session_id, subscribed=sub is not None)
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
    *,
    settings: Settings,
    together: TogetherClient,
    slack: SlackWeb,
    asker: Asker,
    resource_id: str,
    message_ts: str | None,
) -> ResourceStop:
    """The same allowlist as Stop session, then ask Together to stop the model
    resource (never `force`: a resource with an active session stays up, and
    Together says why); say who did under the clicked alert, and log it. A
    TogetherError (not accepted) is logged and raised (`stop_failed` words it)."""
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
        message = rendering.notice(
            f":octagonal_sign: {user_ref(user_id)} asked Together to stop model resource "
            f"{rendering.code_span(resource_id, ID_LIMIT)}. {ACCEPTED_UNREAD}"
        )
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
        why = exc.user_message  # worded for sessions
        if thing == "model resource" and exc.kind == "not_found":
            why = "Together has no such model resource."
        elif thing == "model resource" and exc.kind == "invalid_id":
            why = "That is not a model resource id."
        return exc.kind, f":warning: The {thing} was not stopped. {why}"
    if status is not None and 400 <= status < 500 and status not in _NOT_TAKEN:
        return "refused", f":no_entry_sign: {refused_words(exc, thing)}"
    if status is not None and status < 500:  # a redirect, or a request not taken
        return exc.kind, (
            f":warning: The {thing} was not stopped: Together did not take the request "
            f"(HTTP {status}). Try again shortly."
        )
    if status is None:  # timed out, or the connection broke: it may have arrived
        what = "no answer came back in time"
    else:
        what = f"it answered with a server error (HTTP {status})"
    if thing == "session":
        then = f"Run {rendering.code_span(f'/rl-session {thing_id}', ID_LIMIT)} to see its state."
    else:
        then = "Try again shortly to find out."
    return (
        exc.kind,
        f":warning: I could not tell whether Together stopped the {thing}: {what}. {then}",
    )


def refused_words(exc: TogetherError, thing: Thing) -> str:
    """Why Together refused a stop, in its own words (escaped and bounded, as all
    of its text is), or a plain line when it gave none."""
    if exc.together_message:
        said = sentence(inert(exc.together_message, VALUE_LIMIT))
        return f"Together did not stop the {thing}: {said}"
    hint = (
        " If a session on it is still active, stop that session first."
        if thing != "session"
        else ""
    )
    return f"Together did not stop the {thing} and gave no reason (HTTP {exc.status}).{hint}"


def _stop_accepted_message(user_id: str, session_id: str, *, subscribed: bool) -> rendering.Message:
    """Who stopped it, when Together accepted the stop but its state could not be
    read: a subscription's poller shows the change in its thread; elsewhere the
    person can ask for the card."""
    then = (
        "It is being confirmed: the subscription's thread is updated when it changes."
        if subscribed
        else f"Run {rendering.code_span(f'/rl-session {session_id}', ID_LIMIT)} to see it."
    )
    return rendering.notice(
        f":octagonal_sign: {user_ref(user_id)} asked Together to stop this session. "
        f"{ACCEPTED_UNREAD} {then}"
    )


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
