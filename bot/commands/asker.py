"""Who asks, and where: what every request a person makes (a slash command, a
card button, App Home) hands to the steps in `bot.commands`.

Those steps take the runtime's parts they use as one `CommandDeps` (a
listener's `Request` is one), or just the sessionmaker, and the request's own
values as keywords; they open their own short transactions and never hold one
across a Slack or Together call.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.store.session import Sessionmaker as Sessionmaker


@dataclass(frozen=True)
class Asker:
    """Who asks, and the channel they ask in, as Slack signed them: a
    subscription is always the one of this channel, never one a value names."""

    team_id: str
    channel_id: str
    user_id: str
