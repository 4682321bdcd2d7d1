"""What the outbox remembers of a channel: the rows it was written, read back for
the day's digest."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, select

from bot.outbox.contract.payloads import Kind
from bot.outbox.table import OutboxMessage
from bot.store.session import Db


async def status_rows(
    db: Db, channel_id: str, *, since: datetime
) -> Sequence[Row[str | None, Kind, dict[str, Any]]]:
    """The channel's `transition` and `root` rows written since `since`, oldest first:
    each its `session_id`, `kind` and stored `payload`."""
    rows = await db.execute(
        select(OutboxMessage.session_id, OutboxMessage.kind, OutboxMessage.payload)
        .where(
            OutboxMessage.channel_id == channel_id,
            OutboxMessage.kind.in_([Kind.TRANSITION, Kind.ROOT]),
            OutboxMessage.created_at >= since,
        )
        .order_by(OutboxMessage.id)
    )
    return rows.all()
