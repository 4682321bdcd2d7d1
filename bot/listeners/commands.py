"""`/rl-session`: ack at once, then do the work and answer through response_url."""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import rendering
from bot.command_parser import Command, Problem, parse
from bot.listeners.replies import reply
from bot.models import TrainingSession
from bot.runtime import Runtime
from bot.storage import Subscription, WatchedSession, utcnow
from bot.subscriptions import (
    DM_PROBLEM,
    SubscriptionError,
    channel_subscriptions,
    fetch_for_user,
    set_digest,
    set_mute,
    subscribe,
    unsubscribe,
)
from bot.together import USER_MESSAGES, TogetherError

log = logging.getLogger(__name__)
COMMAND = "/rl-session"


def register(app: AsyncApp) -> None:
    app.command(COMMAND)(handle)
    app.command(OTHER_COMMANDS)(ignore_other)


OTHER_COMMANDS = re.compile(rf"^(?!{re.escape(COMMAND)}$).*")


async def ignore_other(ack: AsyncAck, body: dict[str, Any]) -> None:
    """A command this app does not own (a misconfigured manifest): say so politely."""
    await ack(response_type="ephemeral", text=f"rl-bot only answers `{COMMAND}`.")


async def handle(
    ack: AsyncAck,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
    context: AsyncBoltContext,
) -> None:
    rt: Runtime = context["rt"]
    command = parse(body.get("text"))
    metrics = rt.metrics.commands
    if command.problem or command.verb == "help":
        await ack(**_immediate(command))
        metrics.labels(
            verb=command.verb, outcome="usage" if not command.problem else "invalid"
        ).inc()
        return
    await ack()
    started = time.monotonic()
    outcome = "ok"
    try:
        outcome = await _run(command, rt=rt, body=body, respond=respond, client=client)
    except Exception:
        outcome = "crash"
        log.exception("command failed", extra={"verb": command.verb})
        await _answer(
            respond,
            client,
            body,
            rendering.notice(
                ":warning: Something went wrong on my side. The operators can find it in the logs."
            ),
        )
    finally:
        metrics.labels(verb=command.verb, outcome=outcome).inc()
        log.info(
            "command %s: %s in %.3fs",
            command.verb,
            outcome,
            time.monotonic() - started,
            extra={
                "channel_id": body.get("channel_id"),
                "team_id": body.get("team_id"),
                "session_id": command.session_id,
            },
        )


def _immediate(command: Command) -> dict[str, Any]:
    if command.problem is Problem.INVALID_ID:
        message = rendering.notice(f":no_entry_sign: {USER_MESSAGES['invalid_id']}")
    elif command.problem is Problem.USAGE:
        help_ = rendering.help_message()
        message = {
            "text": command.reason,
            "blocks": [
                *rendering.notice(f":thinking_face: {command.reason}")["blocks"],
                *help_["blocks"],
            ],
        }
    else:
        message = rendering.help_message()
    return {"response_type": "ephemeral", "text": message["text"], "blocks": message["blocks"]}


async def _answer(
    respond: AsyncRespond,
    client: AsyncWebClient,
    body: dict[str, Any],
    message: rendering.Message,
    *,
    in_channel: bool = False,
) -> None:
    await reply(
        respond,
        client,
        channel_id=body.get("channel_id"),
        user_id=body.get("user_id"),
        message=message,
        in_channel=in_channel,
    )


@dataclass
class Ctx:
    """One command's verified facts and the ways to answer it."""

    rt: Runtime
    body: dict[str, Any]
    respond: AsyncRespond
    client: AsyncWebClient

    @property
    def team_id(self) -> str:
        return str(self.body.get("team_id", ""))

    @property
    def channel_id(self) -> str:
        return str(self.body.get("channel_id", ""))

    @property
    def user_id(self) -> str:
        return str(self.body.get("user_id", ""))

    async def answer(self, message: rendering.Message, *, in_channel: bool = False) -> None:
        await _answer(self.respond, self.client, self.body, message, in_channel=in_channel)

    async def say(self, text: str) -> None:
        await self.answer(rendering.notice(text))


async def _run(
    command: Command,
    *,
    rt: Runtime,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
) -> str:
    ctx = Ctx(rt, body, respond, client)
    handler = {
        "list": _list,
        "unsubscribe": _unsubscribe,
        "mute": _mute,
        "unmute": _mute,
        "digest": _digest,
        "show": _show_or_subscribe,
        "subscribe": _show_or_subscribe,
    }[command.verb]
    return await handler(command, ctx)


async def _list(command: Command, ctx: Ctx) -> str:
    async with ctx.rt.sessionmaker() as db:
        rows = await channel_subscriptions(db=db, team_id=ctx.team_id, channel_id=ctx.channel_id)
    now = utcnow()
    listed = [
        rendering.ListedSubscription(
            s.session_id,
            _display_name(w),
            w.last_status if w else None,
            filters=s.filter_set,
            muted_until=s.muted_until if s.muted_until and s.muted_until > now else None,
        )
        for s, w in rows
    ]
    await ctx.answer(rendering.subscription_list(listed))
    return "ok"


async def _unsubscribe(command: Command, ctx: Ctx) -> str:
    assert command.session_id is not None
    sub = await end_here(
        ctx.rt,
        ctx.client,
        team_id=ctx.team_id,
        channel_id=ctx.channel_id,
        session_id=command.session_id,
        user_id=ctx.user_id,
    )
    if sub is None:
        await ctx.say(f"This channel is not subscribed to `{command.session_id}`.")
        return "not_subscribed"
    await ctx.say(f":white_check_mark: Unsubscribed this channel from `{command.session_id}`.")
    return "ok"


async def end_here(
    rt: Runtime,
    client: AsyncWebClient,
    *,
    team_id: str,
    channel_id: str,
    session_id: str,
    user_id: str,
) -> Subscription | None:
    """End this channel's subscription, say so in its thread, turn its root back."""
    async with rt.sessionmaker() as db, db.begin():
        sub = await unsubscribe(
            db=db,
            team_id=team_id,
            channel_id=channel_id,
            session_id=session_id,
            user_id=user_id,
        )
    if sub is not None:
        await announce_unsubscribed(client, sub.channel_id, sub.root_ts, user_id, session_id, rt)
    return sub


async def _mute(command: Command, ctx: Ctx) -> str:
    assert command.session_id is not None
    until = utcnow() + command.duration if command.duration is not None else None
    async with ctx.rt.sessionmaker() as db, db.begin():
        sub, was_muted = await set_mute(
            db=db,
            team_id=ctx.team_id,
            channel_id=ctx.channel_id,
            session_id=command.session_id,
            until=until,
        )
    if sub is None:
        await ctx.say(f"This channel is not subscribed to `{command.session_id}`.")
        return "not_subscribed"
    if until is None and not was_muted:
        await ctx.say(f"This channel's updates of `{command.session_id}` are not muted.")
        return "not_muted"
    message = (
        rendering.muted_message(ctx.user_id, until)
        if until is not None
        else rendering.unmuted_message(ctx.user_id)
    )
    await _post_in_thread(ctx.client, sub.channel_id, sub.root_ts, message)
    await ctx.answer(message)
    return "ok"


async def _digest(command: Command, ctx: Ctx) -> str:
    if ctx.channel_id.startswith("D"):
        await ctx.say(DM_PROBLEM)
        return "refused"
    zone = command.timezone or ctx.rt.settings.default_timezone
    async with ctx.rt.sessionmaker() as db, db.begin():
        await set_digest(
            db=db,
            team_id=ctx.team_id,
            channel_id=ctx.channel_id,
            user_id=ctx.user_id,
            at=command.digest_time,
            tz=zone,
        )
    if command.digest_time is None:
        await ctx.say(":white_check_mark: The daily digest for this channel is off.")
    else:
        await ctx.say(
            f":white_check_mark: This channel gets a daily digest at {command.digest_time} "
            f"({zone}). `/rl-session digest off` stops it."
        )
    return "ok"


async def _show_or_subscribe(command: Command, ctx: Ctx) -> str:
    assert command.session_id is not None
    try:
        session = await fetch_for_user(ctx.rt.together, command.session_id)
    except TogetherError as exc:
        _log_together(exc, command.session_id)
        await ctx.say(f":warning: {exc.user_message}")
        return exc.kind
    if command.verb == "show":
        await ctx.answer(rendering.card(session), in_channel=True)
        return "ok"
    try:
        result = await subscribe(
            sessionmaker=ctx.rt.sessionmaker,
            slack=ctx.client,
            session=session,
            team_id=ctx.team_id,
            channel_id=ctx.channel_id,
            user_id=ctx.user_id,
            poll_interval=ctx.rt.settings.poll_interval_seconds,
            filters=command.filters,
        )
    except SubscriptionError as exc:
        await ctx.say(f":warning: {exc}")
        return "refused"
    what = ", ".join(sorted(result.filters))
    if result.filters_changed:
        text = f":white_check_mark: Filters for `{session.id}` in this channel are now: {what}."
    elif result.already:
        text = f"This channel is already subscribed to `{session.id}`; updates go in its thread."
    else:
        text = (
            f":white_check_mark: Subscribed ({what}). Updates of `{session.id}` will be told "
            "in the thread of the card I just posted."
        )
    await ctx.say(text)
    return "already" if result.already else "ok"


async def _post_in_thread(
    client: AsyncWebClient, channel_id: str, root_ts: str, message: rendering.Message
) -> None:
    try:
        await client.chat_postMessage(
            channel=channel_id, thread_ts=root_ts, text=message["text"], blocks=message["blocks"]
        )
    except SlackApiError as exc:
        log.warning(
            "could not post in the thread: %s",
            exc.response.get("error"),
            extra={"channel_id": channel_id},
        )


def _display_name(watch: WatchedSession | None) -> str | None:
    name = (watch.snapshot or {}).get("display_name") if watch else None
    return name if isinstance(name, str) else None


def _log_together(exc: TogetherError, session_id: str) -> None:
    if exc.kind == "auth":
        log.error("Together rejected the API key", extra={"session_id": session_id})
    elif exc.kind != "not_found":
        log.warning("Together request failed: %s", exc, extra={"session_id": session_id})


async def announce_unsubscribed(
    client: AsyncWebClient,
    channel_id: str,
    root_ts: str,
    user_id: str,
    session_id: str,
    rt: Runtime,
) -> None:
    """Say so in the thread and turn the root's button back into Subscribe."""
    await _post_in_thread(client, channel_id, root_ts, rendering.unsubscribed_message(user_id))
    try:
        async with rt.sessionmaker() as db:
            watch = await db.get(WatchedSession, session_id)
        if watch is not None and watch.snapshot:
            card = rendering.card(TrainingSession.model_validate(watch.snapshot), subscribed=False)
            await client.chat_update(
                channel=channel_id, ts=root_ts, text=card["text"], blocks=card["blocks"]
            )
    except SlackApiError as exc:
        log.warning(
            "could not turn the root card back: %s",
            exc.response.get("error"),
            extra={"channel_id": channel_id},
        )
