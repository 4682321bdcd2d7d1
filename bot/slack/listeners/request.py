"""One shape for what a person asks, by slash command or by button, and one
wrapper that acks it, refuses what cannot be acted on, runs it, catches what
goes wrong, counts it (`rlbot_commands_total{verb, outcome}`) and logs it.

The facts come from the payload Slack signed: the channel acted on is always the
one Slack says the request came from; a button's value only names something,
and is checked before anything runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from slack_bolt.async_app import AsyncAck, AsyncBoltContext, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bot import rendering
from bot.commands.asker import Asker
from bot.runtime import Runtime
from bot.settings.model import Settings
from bot.slack.listeners.replies import reply
from bot.slack_web import SlackWeb
from bot.store.session import Sessionmaker
from bot.subscriptions.errors import SubscriptionError
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError

log = logging.getLogger(__name__)

SORRY = ":warning: Something went wrong on my side. The operators can find it in the logs."


def _obj(value: Any) -> dict[str, Any]:
    """A payload field that should be an object; anything else (null, a string) is empty."""
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Request:
    """Who asked, where, about what, and the ways to answer them."""

    rt: Runtime
    client: AsyncWebClient
    respond: AsyncRespond | None  # None where Slack gives no response_url (App Home)
    kind: Literal["command", "button"]
    verb: str  # the metrics label: a command's verb, or the button's name
    team_id: str
    channel_id: str
    user_id: str
    session_id: str = ""  # the session a command or a card button names
    value: str = ""  # what the button carries, unread
    message_ts: str | None = None  # the clicked message, unless it was ephemeral
    on_root_card: bool = False  # the clicked card offers Unsubscribe
    # the clicked message as Slack sent it (text and blocks), for a redraw with a note
    clicked: dict[str, Any] = field(default_factory=dict)

    @property
    def slack(self) -> SlackWeb:
        """The outbound calls, over Bolt's client for this request."""
        return SlackWeb(self.client)

    # The runtime's other parts, so a request is what the steps in `bot.commands`
    # take (`CommandDeps`), with Slack over this request's client.
    @property
    def settings(self) -> Settings:
        return self.rt.settings

    @property
    def together(self) -> TogetherClient:
        return self.rt.together

    @property
    def sessionmaker(self) -> Sessionmaker:
        return self.rt.sessionmaker

    @classmethod
    def of_command(
        cls,
        body: dict[str, Any],
        verb: str,
        session_id: str | None,
        *,
        rt: Runtime,
        client: AsyncWebClient,
        respond: AsyncRespond | None,
    ) -> Request:
        return cls(
            rt=rt,
            client=client,
            respond=_usable(respond),
            kind="command",
            verb=verb,
            team_id=str(body.get("team_id") or ""),
            channel_id=str(body.get("channel_id") or ""),
            user_id=str(body.get("user_id") or ""),
            session_id=session_id or "",
        )

    @classmethod
    def of_click(
        cls,
        body: dict[str, Any],
        verb: str,
        *,
        names_session: bool,
        rt: Runtime,
        client: AsyncWebClient,
        respond: AsyncRespond | None,
    ) -> Request:
        actions = body.get("actions")
        action = _obj(actions[0] if isinstance(actions, list) and actions else None)
        container = _obj(body.get("container"))
        user = _obj(body.get("user"))
        value = str(action.get("value") or "")
        return cls(
            rt=rt,
            client=client,
            respond=_usable(respond),
            kind="button",
            verb=verb,
            team_id=str(_obj(body.get("team")).get("id") or user.get("team_id") or ""),
            channel_id=str(_obj(body.get("channel")).get("id") or ""),
            user_id=str(user.get("id") or ""),
            session_id=value if names_session else "",
            value=value,
            message_ts=None if container.get("is_ephemeral") else container.get("message_ts"),
            on_root_card=_offers_unsubscribe(_obj(body.get("message"))),
            clicked=_clicked(_obj(body.get("message"))),
        )

    @property
    def asker(self) -> Asker:
        return Asker(self.team_id, self.channel_id, self.user_id)

    async def answer(
        self,
        message: rendering.Message,
        *,
        in_channel: bool = False,
        replace_original: bool = False,
    ) -> None:
        """Through response_url, or as an ephemeral message if that has expired."""
        await reply(
            self.respond,
            self.client,
            channel_id=self.channel_id or None,
            user_id=self.user_id or None,
            message=message,
            in_channel=in_channel,
            replace_original=replace_original,
        )

    async def say(self, text: str) -> None:
        """A one-line answer in the bot's own words."""
        await self.answer(rendering.notice(text))

    async def answer_or_refuse(self, answer: rendering.Message | str) -> str:
        """A workflow's answer: a message, or (a string) why it was refused."""
        if isinstance(answer, str):
            await self.say(f":no_entry_sign: {answer}")
            return "refused"
        await self.answer(answer)
        return "ok"


def _usable(respond: AsyncRespond | None) -> AsyncRespond | None:
    """Bolt hands every listener a `respond`, even where Slack sent no
    response_url (App Home); such a one only raises."""
    return respond if respond is not None and respond.response_url else None


def _clicked(message: dict[str, Any]) -> dict[str, Any]:
    """The clicked message's text and blocks (anything else of it is dropped)."""
    blocks = message.get("blocks")
    return {
        "text": str(message.get("text") or ""),
        "blocks": [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else [],
    }


def _offers_unsubscribe(message: dict[str, Any]) -> bool:
    """A root card offers Unsubscribe: redrawing it keeps that button."""
    for block in message.get("blocks") or []:
        for element in _obj(block).get("elements") or []:
            if _obj(element).get("action_id") == rendering.UNSUBSCRIBE:
                return True
    return False


Handler = Callable[[Request], Awaitable[str]]
"""Does the work and answers; returns the outcome to count."""

Check = Callable[[Request], str | None]
"""What makes a request unusable, in words for the person; None if it is fine."""


def count(rt: Runtime, verb: str, outcome: str) -> None:
    rt.metrics.commands.labels(verb=verb, outcome=outcome).inc()


async def run(req: Request, handler: Handler) -> None:
    """Run an acked, checked request. A TogetherError or SubscriptionError is
    told as it is worded; anything else is a crash, logged and apologised for."""
    started = time.monotonic()
    outcome = "crash"
    try:
        outcome = await handler(req)
    except TogetherError as exc:
        outcome = exc.kind
        _log_together(exc, req)
        await req.say(f":warning: {exc.user_message}")
    except SubscriptionError as exc:
        outcome = "refused"
        await req.say(f":warning: {exc}")
    except Exception:
        log.exception("%s %s failed", req.kind, req.verb, extra={"verb": req.verb})
        await req.say(SORRY)
    finally:
        count(req.rt, req.verb, outcome)
        log.info(
            "%s %s: %s in %.3fs",
            req.kind,
            req.verb,
            outcome,
            time.monotonic() - started,
            extra={
                "channel_id": req.channel_id,
                "team_id": req.team_id,
                "session_id": req.session_id or None,
            },
        )


def _log_together(exc: TogetherError, req: Request) -> None:
    extra = {"session_id": req.session_id or None}
    if exc.kind == "auth":
        log.error("Together rejected the API key", extra=extra)
    elif exc.kind not in ("not_found", "invalid_id"):
        log.warning("Together request failed: %s", exc, extra=extra)


BoltListener = Callable[..., Awaitable[None]]


def button(
    verb: str, handler: Handler, *, check: Check | None = None, names_session: bool = True
) -> BoltListener:
    """A button's Bolt listener: ack at once (Slack wants it within 3 s and
    shows nothing from it), read the click, refuse it if `check` says so, run."""

    async def listener(
        ack: AsyncAck,
        body: dict[str, Any],
        client: AsyncWebClient,
        context: AsyncBoltContext,
        respond: AsyncRespond | None = None,
    ) -> None:
        await ack()
        req = Request.of_click(
            body,
            verb,
            names_session=names_session,
            rt=context["rt"],
            client=client,
            respond=respond,
        )
        problem = check(req) if check is not None else None
        if problem is not None:
            # Our buttons carry good values: a bad one is a forged or broken payload.
            log.warning("button %s refused: %s", verb, problem, extra={"user_id": req.user_id})
            count(req.rt, verb, "invalid")
            await req.say(f":no_entry_sign: {problem}")
            return
        await run(req, handler)

    return listener
