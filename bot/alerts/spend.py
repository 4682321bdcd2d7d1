"""The spend watch: what a watched session's model resource costs, as the card
shows it. The reads themselves are `bot.alerts.resource_reader`'s.

`stored` keeps what the card needs in `watched_sessions.progress` (`SpendRead`):
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

from bot.alerts.resource_reader import Read
from bot.training.poll_progress import PollProgress, SpendRead
from bot.training.rules import rate_words
from bot.training.status import ResourceStatus

#: the card's spend estimate is redrawn once per this much READY time
SPEND_REDRAW_SECONDS = 900.0


def stored(prev: SpendRead | None, read: Read | None, *, now: datetime) -> SpendRead | None:
    """The new spend read to keep: this read, and the READY time seen so far
    (two READY reads in a row count the time between them). Without a read the
    previous one stands."""
    if read is None:
        return prev
    resource, price = read
    ready_seconds = 0.0
    if prev is not None and prev.resource_id == resource.id:
        ready_seconds = prev.ready_seconds or 0.0
        seen = prev.seen_at
        was_ready = prev.status == ResourceStatus.READY.value
        if was_ready and resource.status_enum is ResourceStatus.READY and seen is not None:
            ready_seconds += max((now - seen).total_seconds(), 0.0)
        if price is None:
            price = prev.cost()
    return SpendRead.of(resource, price, ready_seconds=ready_seconds, seen_at=now)


def card_key(spend: SpendRead | None) -> str | None:
    """A short key of what the card shows of the resource (None: nothing)."""
    if spend is None:
        return None
    # Together's resource as it sent it: the fields shown, without parsing it all.
    resource = spend.facts()
    shown = [
        spend.status,
        resource.compute_config,
        resource.queue_position,
        resource.expires_at if spend.status != ResourceStatus.READY.value else None,
        spend.price,
        int((spend.ready_seconds or 0.0) // SPEND_REDRAW_SECONDS),
    ]
    digest = hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()
    return digest[:16]


def card_view_key(progress: PollProgress) -> str | None:
    """A short key of what the card shows of a `watched_sessions.progress`
    value: the resource (`card_key`) and the steps/min as worded (None: neither)."""
    spend, rate = card_key(progress.spend), rate_words(progress.rate)
    if spend is None and rate is None:
        return None
    return f"{spend or '-'}:{hashlib.sha256((rate or '').encode()).hexdigest()[:8]}"
