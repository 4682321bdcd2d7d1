"""A command's fresh fetch of a session, and that fetch written as the session's
poll (`bot.poll.from_command`), with delivery rung if it told a change."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from bot.poll.from_command import poll_from_command
from bot.runtime import Runtime
from bot.together.client import TogetherClient
from bot.training.sessions import TrainingSession

log = logging.getLogger(__name__)

AsPoll = Callable[[TrainingSession], Awaitable[None]]


async def fetch_for_user(together: TogetherClient, session_id: str) -> TrainingSession:
    """A user is waiting: retry transient failures a little, within seconds."""
    return await together.get_session(session_id, retries=2, backoff=0.5, max_wait=5.0)


def as_poll(rt: Runtime) -> AsPoll:
    """What a command does with a session it has just fetched: count it as the poll.
    A failure here is logged and never changes the person's answer: the poller
    polls the session as it would have."""

    async def record(session: TrainingSession) -> None:
        try:
            rows = await poll_from_command(
                rt.sessionmaker, session, owner=rt.owner, settings=rt.settings
            )
        except Exception as exc:
            log.warning(
                "could not write a command's fetch as the session's poll: %s",
                exc,
                extra={"session_id": session.id},
            )
            return
        if rows:
            rt.deliver_soon.set()

    return record
