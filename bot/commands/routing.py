"""A `subscribe` answer's words for the thread's options: the options read and
the session's creator looked up in CREATED_BY_USER_MAP here, worded by
`bot.rendering.thread_options`."""

from __future__ import annotations

from collections.abc import Mapping

from bot.rendering import thread_options
from bot.subscriptions.options import ThreadOptions
from bot.training.sessions import TrainingSession


def option_words(
    options: ThreadOptions, session: TrainingSession, user_map: Mapping[str, str]
) -> str:
    """`, stalled after 30 min without progress, …` for the options given beyond
    the filters; "" when none was."""
    words = thread_options.option_words(
        stall_minutes=options.stall_after_minutes,
        target_step=options.target_step,
        chart_on_end=options.chart_on_end,
    )
    return words + routing_words(options, session, user_map)


def routing_words(
    options: ThreadOptions, session: TrainingSession, user_map: Mapping[str, str]
) -> str:
    """`, errors also shown in the channel, DMs to <@U…>` for the options given;
    "" when none was."""
    creator = session.created_by or ""
    return thread_options.routing_words(
        broadcast=options.broadcast,
        dm=options.dm,
        creator=creator,
        creator_slack_user=user_map.get(creator),
    )
