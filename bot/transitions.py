"""The state diff: what the poller saw last versus what Together says now.

Pure: plain values in, a `Transition` (or None) out, so every rule about what
is worth telling lives here and is tested without a database.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.models import Status, TrainingSession, is_terminal, short_status, status_of


@dataclass(frozen=True)
class Transition:
    old_status: str
    new_status: str
    ended: bool  # the session reached a terminal status or is gone
    gone: bool = False  # Together answers 404 for it now

    @property
    def is_error(self) -> bool:
        return status_of(self.new_status) is Status.ERROR


def detect(last_status: str, session: TrainingSession) -> Transition | None:
    """A status change is a transition; step and checkpoint changes are not."""
    old, new = short_status(last_status), short_status(session.status)
    if old == new:
        return None
    return Transition(old_status=last_status, new_status=session.status, ended=is_terminal(new))


def gone(last_status: str) -> Transition:
    return Transition(old_status=last_status, new_status="GONE", ended=True, gone=True)
