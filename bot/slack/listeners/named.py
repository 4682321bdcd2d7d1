"""The buttons of a name that several sessions share: each runs the command as
typed, with one match's id in place of the name (`bot.rendering.named`). The
value is read as a command again and checked like typed text; it runs as the
person who clicked, in the channel Slack says the click came from."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.commands.parser import parse
from bot.rendering import answers
from bot.rendering.named import PICKED
from bot.slack.listeners.commands import dispatch
from bot.slack.listeners.request import Request, button
from bot.training.sessions import is_session_id


def register(app: AsyncApp) -> None:
    app.action(PICKED)(button("pick_session", picked, check=pick_problem, names_session=False))


def pick_problem(req: Request) -> str | None:
    """The value must be a command naming one session by a well-formed id."""
    command = parse(req.value)
    target = command.target
    if command.problem is not None or target is None or not is_session_id(target):
        return answers.OUT_OF_DATE_BUTTON
    if not req.channel_id or not req.user_id:
        return answers.NOWHERE
    return None


async def picked(req: Request) -> str:
    return await dispatch(req, parse(req.value), req.value)
