"""What the poll cycle reads of the running bot, and what the poller keeps
between cycles."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from bot.alerts.resource_reader import ResourceReader
from bot.poll.pace import Planner
from bot.settings.model import Settings
from bot.store.session import Sessionmaker
from bot.together.client import TogetherClient
from bot.together.list_pass import Lister


class PollDeps(Protocol):
    """The runtime's parts a poll cycle uses, so a test or a bench can hand in its
    own without building a whole runtime; `Runtime` is one."""

    @property
    def sessionmaker(self) -> Sessionmaker: ...
    @property
    def together(self) -> TogetherClient: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def owner(self) -> str: ...


@dataclass
class PollState:
    """What the poller keeps across cycles: what it has seen of the project
    (`planner`), the shared list passes (`lister`; a cycle's own without one),
    the spend watch's reader (None: no spend watch), and whom to ring when a
    cycle has written outbox rows."""

    planner: Planner = field(default_factory=Planner)
    lister: Lister | None = None
    resources: ResourceReader | None = None
    wrote_rows: Callable[[], None] | None = None
