"""The state diff: what the poller saw last versus what Together says now.

Pure: plain values in, a `Transition` (or None) out, so every rule about what
is worth telling lives here and is tested without a database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import Field

from bot.training.checkpoints import Checkpoint
from bot.training.sessions import TrainingSession
from bot.training.status import Status, is_terminal, short_status, status_of
from bot.training.tolerant import LenientInt, TolerantModel

# The new status of a session Together no longer knows: not one of Together's own.
GONE = "GONE"
# Checkpoints of each kind whose news is told and whose keys are stored: the
# newest. A session may have thousands; the rest are a count ("t#3000").
TOLD_CHECKPOINTS = 10
_KINDS = (("training", "t"), ("inference", "i"))


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


def newest_first(cp: Checkpoint) -> tuple[bool, float]:
    """The order the card lists checkpoints in; undated ones last."""
    created: datetime | None = cp.created_at
    if created is None:
        return (False, 0.0)
    try:
        return (True, (created if created.tzinfo else created.replace(tzinfo=UTC)).timestamp())
    except (OverflowError, OSError, ValueError):
        return (False, 0.0)


def newest(checkpoints: Sequence[Checkpoint], n: int) -> list[int]:
    """The places of the newest `n` of `checkpoints` (ties as the card breaks
    them), in the API's order."""
    kept = range(len(checkpoints))
    if len(checkpoints) <= n:
        return list(kept)
    ranked = sorted(kept, key=lambda i: newest_first(checkpoints[i]), reverse=True)
    return sorted(ranked[:n])


def _told(session: TrainingSession, kind: str) -> tuple[list[Checkpoint], int]:
    """The checkpoints of `kind` whose news is told (the newest, with ids), and how
    many with ids there are in all."""
    listed = [cp for cp in getattr(session, f"{kind}_checkpoints") if cp.id]
    return [listed[i] for i in newest(listed, TOLD_CHECKPOINTS)], len(listed)


def checkpoint_keys(session: TrainingSession) -> list[str]:
    """What of the checkpoints is worth telling once: each id, and each registration,
    of the newest TOLD_CHECKPOINTS of each kind, and how many there are of a kind
    that has more ("t#3000"): stored on every poll, so bounded."""
    keys: list[str] = []
    for kind, code in _KINDS:
        told, count = _told(session, kind)
        for cp in told:
            keys.append(f"{code}:{cp.id}")
            if cp.registered_names():
                keys.append(f"{code}:{cp.id}:registered")
        if count > len(told):
            keys.append(f"{code}#{count}")
    return keys


def checkpoints_beyond(previous: list[str] | None, session: TrainingSession) -> int:
    """New checkpoints since `previous` that `checkpoint_news` does not list (older
    than the newest it tells), by the counts: a burst is told as its newest and a
    number."""
    if previous is None:
        return 0
    seen = set(previous)
    beyond = 0
    for kind, code in _KINDS:
        told, count = _told(session, kind)
        marks = [k for k in previous if k.startswith(f"{code}#")]
        try:
            before = int(marks[-1][2:]) if marks else None
        except ValueError:
            before = None
        if before is None:  # every one was stored: those are all it had
            before = sum(1 for k in previous if k.startswith(f"{code}:") and k.count(":") == 1)
        listed = sum(1 for cp in told if f"{code}:{cp.id}" not in seen)
        beyond += max(0, count - before - listed)
    return beyond


class CheckpointNews(TolerantModel):
    """One checkpoint told new, or newly registered, as a `checkpoints` outbox row
    keeps it. Tolerant like Together's shapes: a row written by an older version
    reads, a field of an odd type falls back to its default (an unknown kind is an
    inference checkpoint, an unknown event "new", as the message always read them)."""

    kind: Literal["training", "inference"] = "inference"
    id: str = ""
    step: LenientInt = None
    #: when it was made, as Together said (ISO text, kept as written)
    created_at: str | None = None
    #: the model names it is registered as
    registered: list[str] = Field(default_factory=list)
    event: Literal["new", "registered"] = "new"


def checkpoint_news(previous: list[str] | None, session: TrainingSession) -> list[CheckpointNews]:
    """Checkpoints (or registrations) among the newest TOLD_CHECKPOINTS of each kind
    that appeared since `previous`; one item each.

    With no previous record (a watch from before checkpoints were tracked) nothing
    is news: the current set becomes the baseline."""
    if previous is None:
        return []
    seen = set(previous)
    items: list[CheckpointNews] = []
    for kind, code in _KINDS:
        for cp in _told(session, kind)[0]:
            names = cp.registered_names()
            is_new = f"{code}:{cp.id}" not in seen
            newly_registered = bool(names) and f"{code}:{cp.id}:registered" not in seen
            if is_new or newly_registered:
                items.append(
                    CheckpointNews(
                        kind=kind,
                        id=cp.id,
                        step=cp.step,
                        created_at=cp.created_at.isoformat() if cp.created_at else None,
                        registered=names,
                        event="new" if is_new else "registered",
                    )
                )
    return items
