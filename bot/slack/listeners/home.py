"""App Home: each user's subscriptions across channels, and the sessions they created."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot import rendering
from bot.commands.follow import set_personal
from bot.commands.home import publish_home
from bot.rendering import answers
from bot.runtime import Runtime
from bot.slack.listeners.request import Request, button
from bot.slack_web import SlackWeb
from bot.subscriptions.service import unsubscribe_from_home

log = logging.getLogger(__name__)


def register(app: AsyncApp) -> None:
    app.event("app_home_opened")(on_home_opened)
    app.action(rendering.HOME_UNSUBSCRIBE)(
        button(
            "home_unsubscribe_button",
            unsubscribe,
            check=subscription_problem,
            names_session=False,
        )
    )
    app.action(rendering.HOME_PERSONAL)(
        button("home_personal_switch", personal_switch, check=switch_problem, names_session=False)
    )


async def on_home_opened(
    event: dict[str, Any], client: AsyncWebClient, context: AsyncBoltContext
) -> None:
    if event.get("tab", "home") != "home":
        return
    await _publish(context["rt"], client, str(event.get("user") or ""))


def subscription_problem(req: Request) -> str | None:
    """The button carries a subscription id; who may use it is checked against the clicker."""
    value = req.value
    if not (value.isascii() and value.isdigit()) or len(value) > 18 or not req.user_id:
        return answers.NOT_A_SUBSCRIPTION
    return None


async def unsubscribe(req: Request) -> str:
    """Only the subscriber may end a subscription from their Home tab."""
    sub = await unsubscribe_from_home(
        sessionmaker=req.rt.sessionmaker,
        slack=req.slack,
        subscription_id=int(req.value),
        user_id=req.user_id,
    )
    if sub is None:
        log.warning("home unsubscribe refused", extra={"user_id": req.user_id})
    await _publish(req.rt, req.client, req.user_id)
    return "ok" if sub is not None else "refused"


def switch_problem(req: Request) -> str | None:
    if req.value not in ("on", "off") or not req.user_id:
        return answers.NOT_ON_OR_OFF
    return None


async def personal_switch(req: Request) -> str:
    """The App Home switch "Tell me about my sessions": the clicker's own, nobody else's."""
    await set_personal(
        sessionmaker=req.rt.sessionmaker,
        team_id=req.team_id,
        user_id=req.user_id,
        on=req.value == "on",
    )
    await _publish(req.rt, req.client, req.user_id)
    return req.value


async def _publish(rt: Runtime, client: AsyncWebClient, user_id: str) -> None:
    await publish_home(
        sessionmaker=rt.sessionmaker,
        slack=SlackWeb(client),
        created_by_user_map=rt.settings.created_by_user_map,
        user_id=user_id,
    )
