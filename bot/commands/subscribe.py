"""`subscribe` from a command or a button: fetch the session the person named,
count that fetch as its poll, then subscribe the person's channel
(`bot.subscriptions.service`)."""

from __future__ import annotations

from bot.commands.as_poll import AsPoll, fetch_for_user
from bot.commands.asker import Asker
from bot.commands.deps import CommandDeps
from bot.subscriptions.options import ThreadOptions
from bot.subscriptions.service import Subscribed, subscribe
from bot.training.sessions import TrainingSession


async def subscribe_here(
    deps: CommandDeps,
    *,
    asker: Asker,
    session_id: str,
    first_poll_in: float,
    options: ThreadOptions,
    root_ts: str | None = None,
    as_poll: AsPoll | None = None,
    session: TrainingSession | None = None,
) -> tuple[TrainingSession, Subscribed]:
    """Fetch the session, then subscribe this channel to it with the thread's
    `options` (see `bot.subscriptions.service.subscribe`). `as_poll` writes the
    fetch as the poll of a session already watched, before this channel joins
    (its root card shows the state it subscribed at).
    `session`: the session as just read (resolving its name), else it is fetched.
    Raises TogetherError or SubscriptionError, each worded for the person."""
    if session is None or session.id != session_id:
        session = await fetch_for_user(deps.together, session_id)
    if as_poll is not None:
        await as_poll(session)
    result = await subscribe(
        sessionmaker=deps.sessionmaker,
        slack=deps.slack,
        session=session,
        team_id=asker.team_id,
        channel_id=asker.channel_id,
        user_id=asker.user_id,
        first_poll_in=first_poll_in,
        options=options,
        root_ts=root_ts,
    )
    return session, result
