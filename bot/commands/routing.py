"""The words a `subscribe` answer gives for its routing options (`broadcast=`,
`dm=`), including the warning that a creator without a CREATED_BY_USER_MAP
entry cannot be DMed until an operator adds one."""

from __future__ import annotations

from collections.abc import Mapping

from bot.commands.parser import Command
from bot.rendering.text import VALUE_LIMIT, code_span, user_ref
from bot.training.sessions import TrainingSession

BROADCAST_WORDS = {
    "errors": "errors also shown in the channel",
    "ends": "the session's end (and errors) also shown in the channel",
    "all": "every thread reply also shown in the channel",
    "off": "nothing shown in the channel beyond the card",
}


def routing_words(command: Command, session: TrainingSession, user_map: Mapping[str, str]) -> str:
    """`, errors also shown in the channel, DMs to <@U…>` for the options given;
    "" when none was."""
    words = ""
    if command.broadcast is not None:
        words += f", {BROADCAST_WORDS.get(command.broadcast, command.broadcast)}"
    if command.dm == "":
        words += ", no DMs to the creator"
    elif command.dm is not None:
        creator = session.created_by or ""
        slack_user = user_map.get(creator)
        if slack_user:
            words += f", DMs to the creator {user_ref(slack_user)} when it errors, stalls or idles"
        else:
            words += (
                f", DMs to the creator once CREATED_BY_USER_MAP maps "
                f"{code_span(creator or '(unknown)', VALUE_LIMIT)} to a Slack user "
                "(an operator adds `together-id=U…`); none until then"
            )
    return words
