"""Card buttons. The channel acted on is always the one Slack says the click
came from; the button value only names a session, and is checked first."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot import rendering, workflows
from bot.listeners.request import Request, button
from bot.models import is_session_id
from bot.subscriptions import fetch_for_user
from bot.together import USER_MESSAGES, TogetherError


def register(app: AsyncApp) -> None:
    app.action(rendering.SUBSCRIBE)(button("subscribe_button", subscribe, check=card_problem))
    app.action(rendering.UNSUBSCRIBE)(button("unsubscribe_button", unsubscribe, check=card_problem))
    app.action(rendering.REFRESH)(button("refresh_button", refresh, check=card_problem))
    app.action(rendering.STOP)(button("stop", stop, check=card_problem))
    app.action(rendering.WANDB)(button("wandb_button", opened_link, names_session=False))


def card_problem(req: Request) -> str | None:
    """A card button must name a session and come from a channel and a user."""
    if not is_session_id(req.session_id):
        return USER_MESSAGES["invalid_id"]
    if not req.channel_id or not req.user_id:
        return "I could not tell where that click came from."
    return None


async def opened_link(req: Request) -> str:
    """The W&B button is a link: Slack opens it; the click only needs its ack."""
    return "ok"


async def subscribe(req: Request) -> str:
    """Subscribe this channel; on an in-channel card the card itself becomes the root."""
    session, result = await workflows.subscribe_here(
        together=req.rt.together,
        sessionmaker=req.rt.sessionmaker,
        slack=req.client,
        session_id=req.session_id,
        asker=req.asker,
        poll_interval=req.rt.settings.poll_interval_seconds,
        root_ts=req.message_ts,
        filters=None,  # the button has no filters to give: keep the channel's
    )
    await req.say(
        "This channel is already subscribed; updates go in its thread."
        if result.already
        else f":white_check_mark: <@{req.user_id}> subscribed this channel to `{session.id}`."
    )
    return "already" if result.already else "ok"


async def unsubscribe(req: Request) -> str:
    """The thread says who unsubscribed; only a channel that was not subscribed is answered."""
    sub = await workflows.unsubscribe_here(
        sessionmaker=req.rt.sessionmaker,
        slack=req.client,
        asker=req.asker,
        session_id=req.session_id,
    )
    if sub is None:
        await req.say("This channel is not subscribed to that session.")
        return "not_subscribed"
    return "ok"


async def refresh(req: Request) -> str:
    session = await fetch_for_user(req.rt.together, req.session_id)
    await req.answer(rendering.card(session, subscribed=req.on_root_card), replace_original=True)
    return "ok"


async def stop(req: Request) -> str:
    """Slack has already shown the confirm dialog; the workflow checks who clicked."""
    try:
        done = await workflows.stop_session(
            settings=req.rt.settings,
            together=req.rt.together,
            sessionmaker=req.rt.sessionmaker,
            slack=req.client,
            session_id=req.session_id,
            asker=req.asker,
            message_ts=req.message_ts,
        )
    except TogetherError as exc:
        await req.say(f":warning: The session was not stopped. {exc.user_message}")
        return exc.kind
    if done.refusal is not None:
        await req.say(f":no_entry_sign: {done.refusal}")
        return "refused"
    assert done.session is not None and done.said is not None
    if not done.said_in_thread:
        await req.say(done.said["text"])
    await req.answer(
        rendering.card(done.session, subscribed=req.on_root_card), replace_original=True
    )
    return "ok"
