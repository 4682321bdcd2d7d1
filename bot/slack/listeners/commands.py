"""`/rl-session`: parse, ack at once (usage and refusals go in the ack itself),
resolve the session named (an id or a display name), then one workflow per
verb, answered through response_url."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bot import rendering
from bot.commands.as_poll import as_poll, fetch_for_user
from bot.commands.card import watched_card
from bot.commands.chart import chart_here
from bot.commands.digest import digest_here
from bot.commands.follow import channel_rule_lines, follow_here, unfollow_here
from bot.commands.ls import org_sessions_page
from bot.commands.mute import mute_here
from bot.commands.names import FETCHING, Named, resolve, resolved, with_id
from bot.commands.parser import Command, Problem, Verb, parse
from bot.commands.routing import option_words
from bot.commands.rules import alert_here, alerts_here, budget_here
from bot.commands.session_ref import as_typed
from bot.commands.subscribe import subscribe_here
from bot.rendering import answers
from bot.rendering.follow import with_rules
from bot.rendering.named import no_session_named, sessions_named
from bot.runtime import Runtime
from bot.slack.listeners.request import Request, count, run
from bot.store.tables import utcnow
from bot.subscriptions import service
from bot.subscriptions.listing import channel_listing

log = logging.getLogger(__name__)

COMMAND = "/rl-session"
NOT_A_SESSION = (
    "That is not a session id or name. Ids look like `123e4567-e89b-12d3-a456-426614174000`; "
    "names are as `/rl-session ls all` shows them."
)
OTHER_COMMANDS = re.compile(rf"^(?!{re.escape(COMMAND)}$).*")


def register(app: AsyncApp) -> None:
    app.command(COMMAND)(on_command)
    app.command(OTHER_COMMANDS)(ignore_other)


async def ignore_other(ack: AsyncAck, body: dict[str, Any]) -> None:
    """A command this app does not own (a misconfigured manifest): say so politely."""
    await ack(response_type="ephemeral", text=f"rl-bot only answers `{COMMAND}`.")


async def on_command(
    ack: AsyncAck,
    body: dict[str, Any],
    respond: AsyncRespond,
    client: AsyncWebClient,
    context: AsyncBoltContext,
) -> None:
    rt: Runtime = context["rt"]
    text = str(body.get("text") or "")
    command = parse(text)
    if command.problem or command.verb == "help":
        await ack(**_immediate(command))
        count(rt, command.verb, "usage" if command.problem is None else "invalid")
        return
    await ack()
    req = Request.of_command(
        body, command.verb, command.target, rt=rt, client=client, respond=respond
    )
    await run(req, lambda r: dispatch(r, command, text))


async def dispatch(req: Request, command: Command, text: str) -> str:
    """The session the command names, by id or by name, then its verb's workflow;
    a name that names several sessions or none is answered here (`text`: the
    command as typed, which each match's button runs again with its id)."""
    word = command.target
    if word is not None:
        named = await resolve(
            req, req.asker, word, lister=req.rt.lister, fetch=command.verb in FETCHING
        )
        if named.session_id is None:
            return await _unresolved(req, named, text)
        command = resolved(command, named)
        req = replace(req, session_id=named.session_id)
        if named.session_id != word:
            log.info(
                "%s %s named its session by name",
                req.kind,
                req.verb,
                extra={"session_id": named.session_id},
            )
    return await HANDLERS[command.verb](req, command)


async def _unresolved(req: Request, named: Named, text: str) -> str:
    word = as_typed(named.word)  # Slack's `&amp;`: the answer escapes the word itself
    if not named.matches:
        await req.answer(no_session_named(word, complete=named.complete))
        return "no_match"
    commands = [with_id(text, session.id) for session in named.matches]
    await req.answer(sessions_named(word, named.matches, commands))
    return "several"


def _immediate(command: Command) -> dict[str, Any]:
    """The ack's own answer: usage, or why the text cannot be acted on."""
    if command.problem is Problem.INVALID_ID:
        message = rendering.notice(f":no_entry_sign: {NOT_A_SESSION}")
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


def _session_id(command: Command) -> str:
    assert command.session_id is not None  # the parser gives every id verb an id
    return command.session_id


async def show(req: Request, command: Command) -> str:
    session = command.session or await fetch_for_user(req.rt.together, _session_id(command))
    await as_poll(req.rt)(session)
    # a watched session's card also shows what the watch saw: resource, price, spend
    card = await watched_card(
        req,
        resources=req.rt.resources,
        session=session,
        asker=req.asker,
    )
    await req.answer(card, in_channel=True)
    return "ok"


async def subscribe(req: Request, command: Command) -> str:
    session, result = await subscribe_here(
        req,
        session_id=_session_id(command),
        asker=req.asker,
        first_poll_in=service.first_poll_seconds(req.rt.settings),
        options=command.options,
        as_poll=as_poll(req.rt),
        session=command.session,
    )
    what = ", ".join(sorted(result.filters)) + option_words(
        command.options, session, req.rt.settings.created_by_user_map
    )
    changed = result.filters_changed or (result.already and command.options.sets_thread)
    await req.say(answers.subscribed(session.id, what, already=result.already, changed=changed))
    return "already" if result.already else "ok"


async def unsubscribe(req: Request, command: Command) -> str:
    session_id = _session_id(command)
    sub = await service.unsubscribe(
        sessionmaker=req.rt.sessionmaker,
        slack=req.slack,
        team_id=req.asker.team_id,
        channel_id=req.asker.channel_id,
        session_id=session_id,
        user_id=req.asker.user_id,
    )
    if sub is None:
        return await _not_subscribed(req, session_id)
    await req.say(answers.unsubscribed(session_id))
    return "ok"


async def mute(req: Request, command: Command) -> str:
    """`mute` with a duration, `unmute` without."""
    session_id = _session_id(command)
    change = await mute_here(
        sessionmaker=req.rt.sessionmaker,
        slack=req.slack,
        asker=req.asker,
        session_id=session_id,
        until=utcnow() + command.duration if command.duration is not None else None,
    )
    if not change.subscribed:
        return await _not_subscribed(req, session_id)
    if change.message is None:
        await req.say(answers.not_muted(session_id))
        return "not_muted"
    await req.answer(change.message)
    return "ok"


async def _not_subscribed(req: Request, session_id: str) -> str:
    await req.say(answers.not_subscribed(session_id))
    return "not_subscribed"


async def digest(req: Request, command: Command) -> str:
    zone = command.timezone or req.rt.settings.default_timezone
    await digest_here(
        sessionmaker=req.rt.sessionmaker,
        asker=req.asker,
        at=command.digest_time,
        tz=zone,
    )
    if command.digest_time is None:
        await req.say(answers.DIGEST_OFF)
    else:
        await req.say(answers.digest_at(command.digest_time, zone))
    return "ok"


async def list_here(req: Request, command: Command) -> str:
    """The channel's subscriptions, then its follow rules."""
    rows = await channel_listing(
        sessionmaker=req.rt.sessionmaker,
        team_id=req.asker.team_id,
        channel_id=req.asker.channel_id,
    )
    rules = await channel_rule_lines(sessionmaker=req.rt.sessionmaker, asker=req.asker)
    await req.answer(with_rules(rendering.subscription_list(rows), rules))
    return "ok"


async def follow(req: Request, command: Command) -> str:
    assert command.rule is not None  # the parser gives `follow` its rule
    answer = await follow_here(
        sessionmaker=req.rt.sessionmaker,
        asker=req.asker,
        spec=command.rule,
        user_map=req.rt.settings.created_by_user_map,
    )
    await req.say(answer)
    return "refused" if answer.startswith(":no_entry_sign:") else "ok"


async def unfollow(req: Request, command: Command) -> str:
    assert command.rule is not None  # the parser gives `unfollow` its rule
    await req.say(
        await unfollow_here(sessionmaker=req.rt.sessionmaker, asker=req.asker, spec=command.rule)
    )
    return "ok"


async def list_org(req: Request, command: Command) -> str:
    """`ls`: the first page of the org's sessions, only to the caller."""
    assert command.listing is not None  # the parser gives `ls` its query
    answer = await org_sessions_page(
        req,
        query=command.listing,
        caller=req.user_id,
        lister=req.rt.lister,
    )
    return await req.answer_or_refuse(answer)


async def chart(req: Request, command: Command) -> str:
    """`chart <id> [metric …]`: a PNG into this channel's thread of the session."""
    return await chart_here(
        req.rt,
        req.slack,
        req.asker,
        _session_id(command),
        command.metrics,
        req.say,
        read=command.session,
    )


async def alert(req: Request, command: Command) -> str:
    assert command.metric_rule is not None  # the parser gives `alert` its rule
    answer = await alert_here(
        sessionmaker=req.rt.sessionmaker, asker=req.asker, spec=command.metric_rule
    )
    await req.say(answer)
    return "refused" if answer.startswith(":no_entry_sign:") else "ok"


async def alerts(req: Request, command: Command) -> str:
    await req.answer(
        await alerts_here(
            sessionmaker=req.rt.sessionmaker, asker=req.asker, session_id=command.rules_of
        )
    )
    return "ok"


async def budget(req: Request, command: Command) -> str:
    assert command.budget is not None  # the parser gives `budget` its amount
    await req.say(
        await budget_here(sessionmaker=req.rt.sessionmaker, asker=req.asker, spec=command.budget)
    )
    return "ok"


HANDLERS: dict[Verb, Callable[[Request, Command], Awaitable[str]]] = {
    "chart": chart,
    "show": show,
    "subscribe": subscribe,
    "unsubscribe": unsubscribe,
    "mute": mute,
    "unmute": mute,
    "digest": digest,
    "list": list_here,
    "ls": list_org,
    "follow": follow,
    "unfollow": unfollow,
    "alert": alert,
    "alerts": alerts,
    "budget": budget,
}
