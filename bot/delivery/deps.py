"""What posting one outbox row reads of the delivery, so the steps below the loop
take one value and not its fields one by one."""

from __future__ import annotations

from typing import Protocol

from bot.settings.model import Settings
from bot.slack_web import SlackWeb
from bot.together.client import TogetherClient


class Posting(Protocol):
    """Slack, the settings, and Together when given (a slow start's place in the
    GPU queue): what a message needs to be drawn and posted; `Delivery` is one."""

    @property
    def slack(self) -> SlackWeb: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def together(self) -> TogetherClient | None: ...
