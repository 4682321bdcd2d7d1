"""What a person's request uses of the running bot, so the steps in
`bot.commands` take one value and a test can hand in its own parts."""

from __future__ import annotations

from typing import Protocol

from bot.settings.model import Settings
from bot.slack_web import SlackWeb
from bot.store.session import Sessionmaker
from bot.together.client import TogetherClient


class CommandDeps(Protocol):
    """The database, Together, Slack and the settings; a listener's `Request` is
    one (Slack over that request's client)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def together(self) -> TogetherClient: ...
    @property
    def sessionmaker(self) -> Sessionmaker: ...
    @property
    def slack(self) -> SlackWeb: ...
