"""The state diff: what the poller saw last versus what Together says now.

Pure: plain values in, a `Transition` (or None) out, so every rule about what
is worth telling lives here and is tested without a database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.training.sessions import TrainingSession
from bot.training.status import Status, is_terminal, short_status, status_of

# The new status of a session Together no longer knows: not one of Together's own.
GONE = "GONE"


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
    """Together no longer knows the session (its JSON 404, confirmed)."""
    return Transition(old_status=last_status, new_status=GONE, ended=True, gone=True)


def checkpoint_keys(session: TrainingSession) -> list[str]:
    """What of the checkpoints is worth telling once: each id, and each registration."""
    keys: list[str] = []
    for kind, checkpoints in (
        ("t", session.training_checkpoints),
        ("i", session.inference_checkpoints),
    ):
        for cp in checkpoints:
            if not cp.id:
                continue
            keys.append(f"{kind}:{cp.id}")
            if cp.registered_names():
                keys.append(f"{kind}:{cp.id}:registered")
    return keys


def checkpoint_news(previous: list[str] | None, session: TrainingSession) -> list[dict[str, Any]]:
    """Checkpoints (or registrations) that appeared since `previous`; one item each.

    With no previous record (a watch from before checkpoints were tracked) nothing
    is news: the current set becomes the baseline."""
    if previous is None:
        return []
    seen = set(previous)
    items: list[dict[str, Any]] = []
    for kind, code, checkpoints in (
        ("training", "t", session.training_checkpoints),
        ("inference", "i", session.inference_checkpoints),
    ):
        for cp in checkpoints:
            if not cp.id:
                continue
            names = cp.registered_names()
            is_new = f"{code}:{cp.id}" not in seen
            newly_registered = bool(names) and f"{code}:{cp.id}:registered" not in seen
            if is_new or newly_registered:
                items.append(
                    {
                        "kind": kind,
                        "id": cp.id,
                        "step": cp.step,
                        "created_at": cp.created_at.isoformat() if cp.created_at else None,
                        "registered": names,
                        "event": "new" if is_new else "registered",
                    }
                )
    return items
