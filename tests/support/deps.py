"""The runtime's parts as loose values, for tests that call a feature without
building a whole runtime: each satisfies the Protocol its feature takes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PollParts:
    """`PollDeps` for a test: any sessionmaker (one that fails on cue, too)."""

    sessionmaker: Any
    together: Any
    settings: Any
    owner: str


@dataclass(frozen=True)
class CommandParts:
    """`CommandDeps` for a test: any sessionmaker (a broken one, too)."""

    settings: Any
    together: Any
    sessionmaker: Any
    slack: Any
