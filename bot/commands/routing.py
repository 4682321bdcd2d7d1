"""The words a `subscribe` answer gives for the thread's options (`stall=`,
`target=`, `chart=`, `broadcast=`, `dm=`), including the warning that a creator
without a CREATED_BY_USER_MAP entry cannot be DMed until an operator adds one."""

from __future__ import annotations

from collections.abc import Mapping

from bot.rendering.text import VALUE_LIMIT, code_span, user_ref
from bot.subscriptions.options import ThreadOptions
from bot.training.sessions import TrainingSession

BROADCAST_WORDS = {
    "errors": "errors also shown in the channel",
    "ends": "the session's end (and errors) also shown in the channel",
    "all": "every thread reply also shown in the channel",
    "off": "nothing shown in the channel beyond the card",
}


def option_words(
    options: ThreadOptions, session: TrainingSession, user_map: Mapping[str, str]
) -> str:
    """`, stalled after 30 min without progress, …` for the options given beyond
    the filters; "" when none was."""
    words = ""
    stall = options.stall_after_minutes
    if stall is not None:
        words += (
            ", stall alerts off" if stall == 0 else f", stalled after {stall} min without progress"
        )
    if options.target_step is not None:
        words += f", target step {options.target_step:,} (the card shows an ETA)"
    if options.chart_on_end is not None:
        words += ", a final chart when it ends" if options.chart_on_end else ", no final chart"
    return words + routing_words(options, session, user_map)


def routing_words(
    options: ThreadOptions, session: TrainingSession, user_map: Mapping[str, str]
) -> str:
    """`, errors also shown in the channel, DMs to <@U…>` for the options given;
    "" when none was."""
    words = ""
    if options.broadcast is not None:
        words += f", {BROADCAST_WORDS.get(options.broadcast, options.broadcast)}"
    if options.dm == "":
        words += ", no DMs to the creator"
    elif options.dm is not None:
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
