"""Which on-call alerts were already told: `alerts_sent`, kept past the outbox's
pruning, so an error that stays an error is paged once."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.engine import insert_ignoring
from bot.store.tables import AlertSent


class Alert(Protocol):
    """What `alerts_sent` keeps of an on-call alert."""

    @property
    def dedupe_key(self) -> str: ...

    @property
    def session_id(self) -> str | None: ...


A = TypeVar("A", bound=Alert)


async def unalerted(db: AsyncSession, alerts: Sequence[A], *, now: datetime) -> list[A]:
    """The alerts among `alerts` not alerted before, now remembered as alerted.

    Written in the caller's transaction with the outbox rows themselves, and
    kept past the outbox's pruning, so an error that stays an error is paged once."""
    if not alerts:
        return []
    keys = {a.dedupe_key: a for a in alerts}
    seen = set(
        (await db.execute(select(AlertSent.key).where(AlertSent.key.in_(list(keys))))).scalars()
    )
    fresh = [a for k, a in keys.items() if k not in seen]
    await remember_alerts(db, fresh, now=now, alerted=True)
    return fresh


async def remember_alerts(
    db: AsyncSession, alerts: Sequence[Alert], *, now: datetime, alerted: bool
) -> None:
    """Remember alerts' keys (`alerted=False`: errors that were history)."""
    if not alerts:
        return
    await db.execute(
        insert_ignoring(db, AlertSent, conflict=["key"]),
        [
            {
                "key": a.dedupe_key,
                "session_id": a.session_id,
                "alerted": alerted,
                "sent_at": now,
                "last_seen_at": now,
            }
            for a in alerts
        ],
    )


async def seen_again(db: AsyncSession, keys: Sequence[str], *, now: datetime) -> None:
    """Note that these alerts' causes were seen again `now`: their memory still matters."""
    await db.execute(
        update(AlertSent)
        .where(AlertSent.key.in_(list(keys)))
        .values(last_seen_at=now)
        .execution_options(synchronize_session=False)
    )
