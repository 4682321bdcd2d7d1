"""What of a session is stored: only what messages are rendered from.

The poller stores a snapshot of each watched session every poll and copies it
into every outbox row; a session with thousands of checkpoints (tens of MB) must
not be stored whole. A snapshot keeps the session's own fields, the newest few
checkpoints of each kind with the total counts, and strings cut just past what
any message shows, so a card rendered from it looks the same as one rendered
from Together's full answer.
"""

from __future__ import annotations

from functools import cache
from itertools import islice
from typing import Any, Literal

from pydantic import StrictInt

from bot.training.checkpoints import Checkpoint
from bot.training.sessions import TrainingSession
from bot.training.tolerant import TolerantModel
from bot.training.transitions import checkpoint_keys, newest

COUNTS_KEY = "checkpoint_counts"
KEPT_CHECKPOINTS = 5
# Longer than every text budget in `bot.rendering`, so the card still shows its "…".
MAX_STRING = 2100
MAX_LIST = 20
MAX_KEYS = 40
MAX_DEPTH = 5
# Values `_bounded` returns as they are.
_PLAIN = frozenset({int, float, bool, type(None)})
# Fields not dumped whole: trimmed apart.
_KEPT_APART = frozenset({"metadata", "training_checkpoints", "inference_checkpoints", COUNTS_KEY})

CheckpointKind = Literal["training", "inference"]


def trimmed_snapshot(session: TrainingSession) -> dict[str, Any]:
    """A bounded JSON-able dict that `TrainingSession.model_validate` reads back."""
    # The checkpoint lists (thousands, at times) and metadata are not dumped whole:
    # only the newest few checkpoints and metadata's W&B entry are kept below.
    full = session.model_dump(mode="json", include=_dumped_fields(type(session)))
    snapshot: dict[str, Any] = {
        k: v if type(v) in _PLAIN else _bounded(v, 1) for k, v in full.items()
    }
    match session.metadata:
        case {"wandb": dict() as wandb}:
            snapshot["metadata"] = {"wandb": _bounded(wandb, 2)}
        case _:
            snapshot["metadata"] = None
    for kind in ("training", "inference"):
        checkpoints: list[Checkpoint] = list(getattr(session, f"{kind}_checkpoints"))
        # The newest (ties as the card breaks them), kept in the API's order.
        snapshot[f"{kind}_checkpoints"] = [
            _bounded(checkpoints[i].model_dump(mode="json"), 2)
            for i in newest(checkpoints, KEPT_CHECKPOINTS)
        ]
    snapshot[COUNTS_KEY] = {
        "training": checkpoint_count(session, "training"),
        "inference": checkpoint_count(session, "inference"),
    }
    return snapshot


class CheckpointCounts(TolerantModel):
    """How many checkpoints of each kind the session had when it was trimmed
    (None: not known; a count that is not an int is not known either)."""

    training: StrictInt | None = None
    inference: StrictInt | None = None


class SessionSnapshot(TrainingSession):
    """A session as stored and told: already trimmed, so copying it into every
    outbox row (one per subscribed thread) dumps it as it is, and reading a row
    back gives the session its message is rendered from. It is what the
    `watched_sessions.snapshot` column reads as (`bot.store.typed_json`)."""

    #: the counts beside the few checkpoints kept (`checkpoint_count`)
    checkpoint_counts: CheckpointCounts | None = None

    @classmethod
    def of(cls, session: TrainingSession) -> SessionSnapshot:
        if isinstance(session, SessionSnapshot):
            return session
        return cls.model_validate(trimmed_snapshot(session))


@cache
def _dumped_fields(model: type[TrainingSession]) -> set[str]:
    return set(model.model_fields) - _KEPT_APART


def seen_state(session: TrainingSession) -> dict[str, Any]:
    """The watch columns that say what the bot last saw of a session.

    Written from one place whenever Together tells the bot a session's state:
    on subscribing (`subscriptions.watch`) and on every poll (`poller`), so the
    two can never drift apart."""
    return {
        "last_status": session.status,
        # The column reads it back as a `SessionSnapshot`; written as the dict it is
        # built as: validating it only to dump it again would triple its cost.
        "snapshot": trimmed_snapshot(session),
        "checkpoint_keys": checkpoint_keys(session),
        # Which Together row this was built from; the poller, which has the row, sets it.
        "fingerprint": None,
    }


def checkpoint_count(session: TrainingSession, kind: CheckpointKind) -> int:
    """How many checkpoints of `kind` the session has: the stored count for a
    trimmed snapshot, else the length of the list."""
    listed = len(getattr(session, f"{kind}_checkpoints"))
    counts = session.checkpoint_counts if isinstance(session, SessionSnapshot) else None
    stored: int | None = None
    if counts is not None:
        stored = counts.training if kind == "training" else counts.inference
    if stored is not None and stored > listed:
        return stored
    return listed


def _bounded(value: Any, depth: int) -> Any:
    """`value` cut to the bounds. A poll cycle runs this over thousands of sessions:
    plain scalars and strings are handled in the loops, without a call each."""
    if isinstance(value, str):
        return value[:MAX_STRING]
    if isinstance(value, dict):
        if depth > MAX_DEPTH:
            return None
        out: dict[str, Any] = {}
        for k, v in islice(value.items(), MAX_KEYS):
            kind = type(v)
            if kind is str:
                v = v[:MAX_STRING]
            elif kind not in _PLAIN:
                v = _bounded(v, depth + 1)
            out[str(k)[:MAX_STRING]] = v
        return out
    if isinstance(value, list):
        if depth > MAX_DEPTH:
            return None
        return [
            v[:MAX_STRING] if type(v) is str else v if type(v) in _PLAIN else _bounded(v, depth + 1)
            for v in value[:MAX_LIST]
        ]
    return value
