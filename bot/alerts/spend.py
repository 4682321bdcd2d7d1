"""The spend watch: what a watched session's model resource costs, as the card
shows it. The reads themselves are `bot.alerts.resource_reader`'s.

`stored` keeps what the card needs in `watched_sessions.progress["spend"]`:
the resource as read, its price, and how long the bot has seen it READY (the
spend estimate is price × that time). `card_key` says when the card is worth
redrawing: when what it shows of the resource changes, and every
`SPEND_REDRAW_SECONDS` of READY time so the estimate moves without a chat.update
per poll.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, TypeVar

from pydantic import ValidationError

from bot.alerts.resource_reader import Read
from bot.training.resources import CostEstimate, ModelResource
from bot.training.rules import rate_words
from bot.training.status import ResourceStatus

#: the card's spend estimate is redrawn once per this much READY time
SPEND_REDRAW_SECONDS = 900.0

_M = TypeVar("_M", ModelResource, CostEstimate)


def stored(prev: Any, read: Read | None, *, now: datetime) -> dict[str, Any] | None:
    """The new `progress["spend"]`: this read, and the READY time seen so far
    (two READY reads in a row count the time between them). Without a read the
    previous one stands."""
    old = prev if isinstance(prev, dict) else None
    if read is None:
        return old
    resource, price = read
    ready_seconds = 0.0
    if old is not None and old.get("resource_id") == resource.id:
        ready_seconds = float_or_none(old.get("ready_seconds")) or 0.0
        seen = time_or_none(old.get("seen_at"))
        was_ready = old.get("status") == ResourceStatus.READY.value
        if was_ready and resource.status_enum is ResourceStatus.READY and seen is not None:
            ready_seconds += max((now - seen).total_seconds(), 0.0)
        if price is None and isinstance(old.get("price"), dict):
            price = stored_model(CostEstimate, old["price"])
    return {
        "resource_id": resource.id,
        "status": resource.status_enum.value,
        "resource": resource.model_dump(mode="json", exclude_none=True),
        "price": price.model_dump(mode="json") if price is not None else None,
        "ready_seconds": ready_seconds,
        "seen_at": now.isoformat(),
    }


def card_key(spend: Any) -> str | None:
    """A short key of what the card shows of the resource (None: nothing)."""
    if not isinstance(spend, dict):
        return None
    resource: dict[str, Any] = spend["resource"] if isinstance(spend.get("resource"), dict) else {}
    status_details = resource.get("status_details")
    shown = [
        spend.get("status"),
        resource.get("compute_config"),
        status_details.get("queue_position") if isinstance(status_details, dict) else None,
        resource.get("expires_at") if spend.get("status") != ResourceStatus.READY.value else None,
        spend.get("price"),
        int((float_or_none(spend.get("ready_seconds")) or 0.0) // SPEND_REDRAW_SECONDS),
    ]
    digest = hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()
    return digest[:16]


def watch_key(progress: Any) -> str | None:
    """A short key of what the card shows of a `watched_sessions.progress`
    value: the resource (`card_key`) and the steps/min as worded (None: neither)."""
    if not isinstance(progress, dict):
        return None
    spend, rate = card_key(progress.get("spend")), rate_words(float_or_none(progress.get("rate")))
    if spend is None and rate is None:
        return None
    return f"{spend or '-'}:{hashlib.sha256((rate or '').encode()).hexdigest()[:8]}"


def stored_model(model: type[_M], data: Any) -> _M | None:
    """A model read back from stored JSON; None when it no longer validates (an old shape)."""
    if not isinstance(data, dict):
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def float_or_none(value: Any) -> float | None:
    """A stored number, or None when the stored value is not one."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def time_or_none(value: Any) -> datetime | None:
    """A stored ISO time, or None when the stored value is not one."""
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None
