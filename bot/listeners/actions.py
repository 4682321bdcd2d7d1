"""Card buttons. The channel acted on is always the one Slack says the click
came from; the button value only names a session, and is validated."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import rendering
from bot.listeners.commands import end_here
from bot.listeners.replies import reply
from bot.models import is_session_id
from bot.runtime import Runtime
from bot.subscriptions import (
    SubscriptionError,
    active_subscription,
    fetch_for_user,
    subscribe,
)
from bot.together import USER_MESSAGES, TogetherError

log = logging.getLogger(__name__)


def register(app: AsyncApp) -> None:
    app.action(rendering.SUBSCRIBE)(card_button(on_subscribe))
    app.action(rendering.UNSUBSCRIBE)(card_button(on_unsubscribe))
    app.action(rendering.REFRESH)(card_button(on_refresh))
    app.action(rendering.WANDB)(on_link)
    app.action(rendering.STOP)(card_button(on_stop))


def _obj(value: Any) -> dict[str, Any]:
    """A payload field that should be an object; anything else (null, a string) is empty."""
    return value if isinstance(value, dict) else {}


class Click:
    """The facts of a click, taken from the verified payload."""

    def __init__(self, body: dict[str, Any]) -> None:
        actions = body.get("actions")
        action = _obj(actions[0] if isinstance(actions, list) and actions else None)
        container = _obj(body.get("container"))
        user = _obj(body.get("user"))
        self.session_id = str(action.get("value") or "")
        self.team_id = str(_obj(body.get("team")).get("id") or user.get("team_id") or "")
        self.channel_id = str(_obj(body.get("channel")).get("id") or "")
        self.user_id = str(user.get("id") or "")
        self.message_ts = None if container.get("is_ephemeral") else container.get("message_ts")

    @property
    def problem(self) -> str | None:
        if not is_session_id(self.session_id):
            return USER_MESSAGES["invalid_id"]
        if not self.channel_id or not self.user_id:
            return "I could not tell where that click came from."
        return None


async def _tell(respond: AsyncRespond, client: AsyncWebClient, click: Click, text: str) -> None:
    await reply(
        respond,
        client,
        channel_id=click.channel_id or None,
        user_id=click.user_id or None,
        message=rendering.notice(text),
    )


ClickHandler = Callable[
    [Runtime, "Click", dict[str, Any], AsyncRespond, AsyncWebClient], Awaitable[None]
]


def card_button(handler: ClickHandler) -> Callable[..., Awaitable[None]]:
    """Ack at once, read the click from the verified payload, refuse a bad one,
    then hand the rest to `handler`."""

    async def listener(
        ack: AsyncAck,
        body: dict[str, Any],
        respond: AsyncRespond,
        client: AsyncWebClient,
        context: AsyncBoltContext,
    ) -> None:
        await ack()
        click = Click(body)
        if click.problem:
            await _tell(respond, client, click, f":no_entry_sign: {click.problem}")
            return
        await handler(context["rt"], click, body, respond, client)

    return listener


async def on_link(ack: AsyncAck) -> None:
    await ack()


async def on_subscribe(
    rt: Runtime,
    click: Click,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    try:
        session = await fetch_for_user(rt.together, click.session_id)
        result = await subscribe(
            sessionmaker=rt.sessionmaker,
            slack=client,
            session=session,
            team_id=click.team_id,
            channel_id=click.channel_id,
            user_id=click.user_id,
            poll_interval=rt.settings.poll_interval_seconds,
            root_ts=click.message_ts,
            filters=None,  # the button has no filters to give: keep the channel's
        )
    except TogetherError as exc:
        await _tell(respond, client, click, f":warning: {exc.user_message}")
        return
    except SubscriptionError as exc:
        await _tell(respond, client, click, f":warning: {exc}")
        return
    rt.metrics.commands.labels(
        verb="subscribe_button", outcome="already" if result.already else "ok"
    ).inc()
    text = (
        "This channel is already subscribed; updates go in its thread."
        if result.already
        else f":white_check_mark: <@{click.user_id}> subscribed this channel to `{session.id}`."
    )
    await _tell(respond, client, click, text)


async def on_unsubscribe(
    rt: Runtime,
    click: Click,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    sub = await end_here(
        rt,
        client,
        team_id=click.team_id,
        channel_id=click.channel_id,
        session_id=click.session_id,
        user_id=click.user_id,
    )
    if sub is None:
        await _tell(respond, client, click, "This channel is not subscribed to that session.")


async def on_refresh(
    rt: Runtime,
    click: Click,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    try:
        session = await fetch_for_user(rt.together, click.session_id)
    except TogetherError as exc:
        await _tell(respond, client, click, f":warning: {exc.user_message}")
        return
    subscribed = _is_subscribed_card(body)
    await reply(
        respond,
        client,
        channel_id=click.channel_id,
        user_id=click.user_id,
        message=rendering.card(session, subscribed=subscribed),
        replace_original=True,
    )


def _is_subscribed_card(body: dict[str, Any]) -> bool:
    """Keep the button the card had: a root card offers Unsubscribe."""
    for block in (body.get("message") or {}).get("blocks") or []:
        for element in block.get("elements") or []:
            if isinstance(element, dict) and element.get("action_id") == "rl_unsubscribe":
                return True
    return False


STOP_NOT_CONFIGURED = (
    "Stopping sessions from Slack is not enabled here. An operator can allow it with "
    "`STOP_ALLOWED_USER_IDS` or `STOP_ALLOWED_USERGROUP`."
)
STOP_REFUSED = "You are not allowed to stop training sessions. Ask someone on the allowed list."


async def may_stop(rt: Runtime, client: AsyncWebClient, user_id: str) -> str | None:
    """None when the user may stop sessions, else the reason they may not."""
    settings = rt.settings
    if not settings.stop_allowed_user_ids and not settings.stop_allowed_usergroup:
        return STOP_NOT_CONFIGURED
    if user_id in settings.stop_allowed_user_ids:
        return None
    if settings.stop_allowed_usergroup:
        try:
            members = await client.usergroups_users_list(usergroup=settings.stop_allowed_usergroup)
        except SlackApiError as exc:
            log.error("cannot read the stop user group: %s", exc.response.get("error"))
            return "I could not check the allowed user group just now; try again shortly."
        if user_id in (members.get("users") or []):
            return None
    return STOP_REFUSED


async def on_stop(
    rt: Runtime,
    click: Click,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> None:
    """Slack has already shown the confirm dialog; check who clicked, then stop."""
    who = {"user_id": click.user_id, "session_id": click.session_id, "channel_id": click.channel_id}
    refusal = await may_stop(rt, client, click.user_id)
    if refusal is not None:
        log.warning("stop refused", extra=who)
        rt.metrics.commands.labels(verb="stop", outcome="refused").inc()
        await _tell(respond, client, click, f":no_entry_sign: {refusal}")
        return
    try:
        session = await rt.together.stop_session(click.session_id)
    except TogetherError as exc:
        log.warning("stop failed: %s", exc, extra=who | {"together": exc.kind})
        rt.metrics.commands.labels(verb="stop", outcome=exc.kind).inc()
        await _tell(
            respond, client, click, f":warning: The session was not stopped. {exc.user_message}"
        )
        return
    log.info("session stop requested", extra=who | {"together_status": session.status})
    rt.metrics.commands.labels(verb="stop", outcome="ok").inc()
    async with rt.sessionmaker() as db:
        sub = await active_subscription(
            db, team_id=click.team_id, channel_id=click.channel_id, session_id=click.session_id
        )
    thread = sub.root_ts if sub is not None else click.message_ts
    message = rendering.stop_requested_message(click.user_id, session)
    try:
        await client.chat_postMessage(
            channel=click.channel_id,
            thread_ts=thread,
            text=message["text"],
            blocks=message["blocks"],
        )
    except SlackApiError as exc:
        log.warning(
            "could not say who stopped the session: %s", exc.response.get("error"), extra=who
        )
        await _tell(respond, client, click, message["text"])
    await reply(
        respond,
        client,
        channel_id=click.channel_id,
        user_id=click.user_id,
        message=rendering.card(session, subscribed=_is_subscribed_card(body)),
        replace_original=True,
    )
