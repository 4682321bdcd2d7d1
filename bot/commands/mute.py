"""`mute` and `unmute`: quiet a channel's updates of a session for a while, and
say so in its thread so everyone there knows why it went silent."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot import rendering
from bot.commands.asker import Asker, Sessionmaker
from bot.slack_web import SlackWeb
from bot.store.queries.subscriptions import set_mute
from bot.subscriptions.redraw import redraw_card
from bot.subscriptions.thread import post_in_thread


@dataclass(frozen=True)
class MuteChange:
    """What a mute or unmute did; `message` was also said in the thread."""

    subscribed: bool
    message: rendering.Message | None = None  # None: unmuting a thread that was not muted


async def mute_here(
    *,
    sessionmaker: Sessionmaker,
    slack: SlackWeb,
    asker: Asker,
    session_id: str,
    until: datetime | None,
) -> MuteChange:
    """Mute this channel's updates of a session until `until` (None: unmute now),
    and say so in its thread; unmuting an unmuted thread is no news."""
    async with sessionmaker() as db, db.begin():
        sub, was_muted = await set_mute(
            db=db,
            team_id=asker.team_id,
            channel_id=asker.channel_id,
            session_id=session_id,
            until=until,
        )
        if sub is not None:
            await redraw_card(
                db,
                team_id=asker.team_id,
                channel_id=asker.channel_id,
                session_id=session_id,
                what="mute",
            )
    if sub is None:
        return MuteChange(subscribed=False)
    if until is None and not was_muted:
        return MuteChange(subscribed=True)
    message = (
        rendering.muted_message(asker.user_id, until)
        if until is not None
        else rendering.unmuted_message(asker.user_id)
    )
    await post_in_thread(slack, sub.channel_id, sub.root_ts, message)
    return MuteChange(subscribed=True, message=message)
