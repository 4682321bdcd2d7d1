"""App Home: each user's subscriptions across channels, and the sessions they created."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import select

from bot import rendering
from bot.listeners.commands import announce_unsubscribed
from bot.runtime import Runtime
from bot.storage import Subscription, WatchedSession
from bot.subscriptions import end_subscriptions

log = logging.getLogger(__name__)


def register(app: AsyncApp) -> None:
    app.event("app_home_opened")(on_home_opened)
    app.action(rendering.HOME_UNSUBSCRIBE)(on_home_unsubscribe)


async def on_home_opened(
    event: dict[str, Any], client: AsyncWebClient, context: AsyncBoltContext
) -> None:
    if event.get("tab", "home") != "home":
        return
    await publish_home(context["rt"], client, str(event.get("user") or ""))


async def publish_home(rt: Runtime, client: AsyncWebClient, user_id: str) -> None:
    if not user_id:
        return
    view = rendering.home_view(*await home_rows(rt, user_id))
    try:
        await client.views_publish(user_id=user_id, view=view)
    except SlackApiError as exc:
        log.warning("views.publish failed: %s", exc.response.get("error"))


async def home_rows(
    rt: Runtime, user_id: str
) -> tuple[list[rendering.HomeSubscription], list[rendering.SessionLine]]:
    mine = [k for k, v in rt.settings.created_by_user_map.items() if v == user_id]
    async with rt.sessionmaker() as db:
        subs = await db.execute(
            select(Subscription, WatchedSession)
            .outerjoin(WatchedSession, WatchedSession.session_id == Subscription.session_id)
            .where(Subscription.subscribed_by == user_id, Subscription.active.is_(True))
            .order_by(Subscription.created_at.desc())
            .limit(100)
        )
        subscriptions = [
            rendering.HomeSubscription(
                s.id, s.channel_id, s.session_id, _name(w), w.last_status if w else None
            )
            for s, w in subs.tuples()
        ]
        created: list[rendering.SessionLine] = []
        if mine:
            watches = await db.execute(
                select(WatchedSession).where(WatchedSession.active.is_(True))
            )
            created = [
                rendering.SessionLine(w.session_id, _name(w), w.last_status)
                for w in watches.scalars()
                if (w.snapshot or {}).get("created_by") in mine
            ]
    return subscriptions, created


def _name(watch: WatchedSession | None) -> str | None:
    name = (watch.snapshot or {}).get("display_name") if watch else None
    return name if isinstance(name, str) else None


async def on_home_unsubscribe(
    ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient, context: AsyncBoltContext
) -> None:
    """Only the subscriber may end a subscription from their Home tab; the
    subscription id in the button is checked against the clicking user."""
    await ack()
    rt: Runtime = context["rt"]
    user_id = str((body.get("user") or {}).get("id") or "")
    value = str(((body.get("actions") or [{}])[0]).get("value") or "")
    if not value.isdigit() or len(value) > 18 or not user_id:
        log.warning("home unsubscribe with a bad value", extra={"user_id": user_id})
        return
    async with rt.sessionmaker() as db, db.begin():
        sub = await db.get(Subscription, int(value))
        if sub is None or not sub.active or sub.subscribed_by != user_id:
            log.warning("home unsubscribe refused", extra={"user_id": user_id})
            sub = None
        else:
            await end_subscriptions(db, [sub.id], reason=f"unsubscribed by {user_id}")
    if sub is not None:
        await announce_unsubscribed(
            client, sub.channel_id, sub.root_ts, user_id, sub.session_id, rt
        )
    await publish_home(rt, client, user_id)
