"""Which thread replies Slack also shows in the channel (`reply_broadcast`):
each subscription's `broadcast=`, else BROADCAST_ERRORS. Pure but for the one
batch read of the chosen modes."""

from __future__ import annotations

from collections.abc import Sequence

from bot.outbox.contract.payloads import (
    Kind,
    Payload,
    RepagePayload,
    RootPayload,
    TransitionPayload,
)
from bot.outbox.table import OutboxMessage
from bot.store.queries.routing import broadcast_modes
from bot.store.session import Db
from bot.training.status import Status, status_of


def default_mode(broadcast_errors: bool) -> str:
    """A thread that chose no `broadcast=`: errors when BROADCAST_ERRORS, else off."""
    return "errors" if broadcast_errors else "off"


def reply_broadcast(payload: Payload, mode: str, *, in_thread: bool) -> bool | None:
    """Whether a thread reply is also shown in the channel: `errors` a status
    change to ERROR, `ends` any change that ends the subscription (errors
    included), `all` every reply, `off` none. A repage of an on-call alert is
    always shown: it is a page. Outside a thread, nothing (None: Slack's default)."""
    if not in_thread or isinstance(payload, RootPayload):
        return None
    if isinstance(payload, RepagePayload):
        return True
    if mode == "all":
        return True
    if not isinstance(payload, TransitionPayload):
        return None
    error = status_of(payload.new_status) is Status.ERROR
    if mode == "errors":
        return error or None
    if mode == "ends":
        return error or payload.ended or payload.gone or None
    return None


#: kinds told in a subscription's thread, whose `broadcast=` applies
_THREAD_KINDS = frozenset({Kind.TRANSITION, Kind.CHECKPOINTS, Kind.PROGRESS, Kind.IDLE})


async def thread_modes(db: Db, rows: Sequence[OutboxMessage]) -> dict[int, str]:
    """The `broadcast=` the rows' subscriptions chose, by subscription (one read)."""
    ids = {
        r.subscription_id for r in rows if r.subscription_id is not None and r.kind in _THREAD_KINDS
    }
    return await broadcast_modes(db, ids)
