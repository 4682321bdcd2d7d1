"""Card buttons, and the buttons of an `ls` page (More, a row's Subscribe and
Stop). The channel acted on is always the one Slack says the click came from;
the button value only names a session (or, for More, carries a checked
query), and is checked first."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot import rendering
from bot.commands import stop as stopping
from bot.commands.as_poll import as_poll, fetch_for_user
from bot.commands.card import watched_card
from bot.commands.chart import chart_here
from bot.commands.ls import org_sessions_page
from bot.commands.ls_query import read_more
from bot.commands.subscribe import subscribe_here
from bot.rendering import answers
from bot.rendering.ls_page import LS_MORE, ROW_STOP, ROW_SUBSCRIBE
from bot.rendering.watch import STOP_RESOURCE
from bot.slack.listeners.request import Request, button
from bot.subscriptions import service
from bot.subscriptions.options import KEEP_THREAD
from bot.together.errors import USER_MESSAGES, TogetherError
from bot.training.sessions import is_session_id


def register(app: AsyncApp) -> None:
    app.action(rendering.SUBSCRIBE)(button("subscribe_button", subscribe, check=card_problem))
    app.action(rendering.UNSUBSCRIBE)(button("unsubscribe_button", unsubscribe, check=card_problem))
    app.action(rendering.REFRESH)(button("refresh_button", refresh, check=card_problem))
    app.action(rendering.CHART)(button("chart_button", chart, check=card_problem))
    app.action(rendering.STOP)(button("stop", stop, check=card_problem))
    app.action(rendering.WANDB)(button("wandb_button", opened_link, names_session=False))
    app.action(LS_MORE)(button("ls_more", more_sessions, check=more_problem, names_session=False))
    app.action(ROW_SUBSCRIBE)(button("ls_subscribe", subscribe, check=card_problem))
    app.action(ROW_STOP)(button("ls_stop", stop_from_list, check=card_problem))
    app.action(STOP_RESOURCE)(
        button("stop_resource", stop_resource, check=resource_problem, names_session=False)
    )


def card_problem(req: Request) -> str | None:
    """A card button must name a session and come from a channel and a user."""
    if not is_session_id(req.session_id):
        return USER_MESSAGES["invalid_id"]
    if not req.channel_id or not req.user_id:
        return answers.NOWHERE
    return None


async def opened_link(req: Request) -> str:
    """The W&B button is a link: Slack opens it; the click only needs its ack."""
    return "ok"


async def subscribe(req: Request) -> str:
    """Subscribe this channel; on an in-channel card the card itself becomes the root."""
    session, result = await subscribe_here(
        req,
        session_id=req.session_id,
        asker=req.asker,
        first_poll_in=service.first_poll_seconds(req.rt.settings),
        root_ts=req.message_ts,
        # the button has no options to give: the channel keeps its filters and thread
        options=KEEP_THREAD,
        as_poll=as_poll(req.rt),
    )
    await req.say(
        answers.ALREADY_SUBSCRIBED_HERE
        if result.already
        else answers.subscribed_by(req.user_id, session.id)
    )
    return "already" if result.already else "ok"


async def unsubscribe(req: Request) -> str:
    """The thread says who unsubscribed; only a channel that was not subscribed is answered."""
    sub = await service.unsubscribe(
        sessionmaker=req.rt.sessionmaker,
        slack=req.slack,
        team_id=req.asker.team_id,
        channel_id=req.asker.channel_id,
        session_id=req.session_id,
        user_id=req.asker.user_id,
    )
    if sub is None:
        await req.say(answers.NOT_SUBSCRIBED_TO_THAT)
        return "not_subscribed"
    return "ok"


async def refresh(req: Request) -> str:
    session = await fetch_for_user(req.rt.together, req.session_id)
    await as_poll(req.rt)(session)
    card = await watched_card(
        req,
        resources=req.rt.resources,
        session=session,
        asker=req.asker,
        subscribed=req.on_root_card,
    )
    await req.answer(card, replace_original=True)
    return "ok"


async def chart(req: Request) -> str:
    """The card's Chart button: `chart <id>` with WANDB_METRICS, from this channel."""
    return await chart_here(req.rt, req.slack, req.asker, req.session_id, (), req.say)


async def _stop_session(req: Request, *, message_ts: str | None) -> stopping.StopRequest | str:
    """Stop the clicked session through the workflow; a Together error or a refusal is
    told to the clicker and comes back as the outcome, a stop as the workflow's answer."""
    try:
        done = await stopping.stop_session(
            req,
            session_id=req.session_id,
            asker=req.asker,
            message_ts=message_ts,
        )
    except TogetherError as exc:
        outcome, words = stopping.stop_failed(exc, "session", req.session_id)
        await req.say(words)
        return outcome
    if done.refusal is not None:
        await req.say(f":no_entry_sign: {done.refusal}")
        return "refused"
    return done


async def stop(req: Request) -> str:
    """Slack has already shown the confirm dialog; the workflow checks who clicked."""
    done = await _stop_session(req, message_ts=req.message_ts)
    if isinstance(done, str):
        return done
    assert done.said is not None
    if done.session is None:  # accepted, state not known: the card stays as it was
        await req.say(done.said["text"])
        return "ok"
    if not done.said_in_thread:
        await req.say(done.said["text"])
    card = await watched_card(
        req,
        resources=req.rt.resources,
        session=done.session,
        asker=req.asker,
        subscribed=req.on_root_card,
    )
    await req.answer(card, replace_original=True)
    return "ok"


def more_problem(req: Request) -> str | None:
    """More carries the query and Together's cursor; anything else is not ours."""
    if read_more(req.value) is None or not req.user_id:
        return answers.OUT_OF_DATE_BUTTON
    return None


async def more_sessions(req: Request) -> str:
    """The next `ls` page, as a new message under the previous one."""
    more = read_more(req.value)
    assert more is not None  # more_problem refused anything else
    answer = await org_sessions_page(
        req,
        query=more.query,
        caller=req.user_id,
        after=more.after,
        first_number=more.first_number,
    )
    return await req.answer_or_refuse(answer)


async def stop_from_list(req: Request) -> str:
    """A row's Stop: the same confirmation and allowlist as the card's, answered
    under the list instead of redrawing a card over it."""
    done = await _stop_session(req, message_ts=None)
    if isinstance(done, str):
        return done
    assert done.said is not None
    await req.say(done.said["text"])
    return "ok"


def resource_problem(req: Request) -> str | None:
    """A Stop resource button must name a resource and come from a channel and a user."""
    if not is_session_id(req.value):  # resource ids share the session ids' alphabet
        return answers.NOT_A_RESOURCE_ID
    if not req.channel_id or not req.user_id:
        return answers.NOWHERE
    return None


async def stop_resource(req: Request) -> str:
    """Slack has shown the confirm dialog; the workflow checks who clicked."""
    try:
        done = await stopping.stop_resource(
            req,
            asker=req.asker,
            resource_id=req.value,
            message_ts=req.message_ts,
        )
    except TogetherError as exc:
        outcome, words = stopping.stop_failed(exc, "model resource", req.value)
        await req.say(words)
        return outcome
    if done.refusal is not None:
        await req.say(f":no_entry_sign: {done.refusal}")
        return "refused"
    assert done.said is not None
    await req.say(done.said["text"])
    return "ok"
