"""Retention's statements: finished outbox rows, remembered alerts and their
acknowledgements past their cut-off, and the ended subscriptions and watches
nobody refers to any more, with their rows. Here rather than in the store
because each one reads the outbox (a pending row keeps what it belongs to).

The cut-offs are the database's clock (`db_now`), passed in by `bot.jobs.prune`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, exists, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.outbox.contract.rows import State
from bot.outbox.order import REDRAWS
from bot.outbox.table import OutboxMessage
from bot.store.engine import rows_touched
from bot.store.tables import AlertAck, AlertSent, Subscription, WatchedSession


async def drop_finished(db: AsyncSession, cutoff: Any) -> int:
    """Finished outbox rows, alerts the error watch has not listed and
    acknowledgements, all older than `cutoff`; how many outbox rows. Pending rows
    are never dropped."""
    result = await db.execute(
        delete(OutboxMessage)
        .where(OutboxMessage.state != State.PENDING, OutboxMessage.created_at < cutoff)
        .execution_options(synchronize_session=False)
    )
    await db.execute(
        delete(AlertSent)
        .where(AlertSent.last_seen_at < cutoff)
        .execution_options(synchronize_session=False)
    )
    await db.execute(
        delete(AlertAck)
        .where(AlertAck.acked_at < cutoff)
        .execution_options(synchronize_session=False)
    )
    return rows_touched(result)


async def drop_finished_redraws(db: AsyncSession, cutoff: Any) -> int:
    """Finished card redraws older than `cutoff`: a redraw tells nothing a later one
    does not, and only its last minute counts (the pace of routine redraws), so
    they are not kept the outbox's whole retention."""
    result = await db.execute(
        delete(OutboxMessage)
        .where(
            OutboxMessage.kind.in_(REDRAWS),
            OutboxMessage.state != State.PENDING,
            OutboxMessage.created_at < cutoff,
        )
        .execution_options(synchronize_session=False)
    )
    return rows_touched(result)


async def drop_ended(db: AsyncSession, cutoff: Any) -> tuple[int, int]:
    """Subscriptions that ended before `cutoff` (with their outbox rows), then the
    watched sessions inactive as long that no subscription names; how many of each.
    One with a message still pending is kept until that is sent."""
    ended = select(Subscription.id).where(
        Subscription.active.is_(False),
        func.coalesce(Subscription.ended_at, Subscription.created_at) < cutoff,
        ~exists().where(
            OutboxMessage.subscription_id == Subscription.id, OutboxMessage.state == State.PENDING
        ),
    )
    # Its rows first, whether or not the database enforces the foreign key.
    await db.execute(
        delete(OutboxMessage)
        .where(OutboxMessage.subscription_id.in_(ended))
        .execution_options(synchronize_session=False)
    )
    subscriptions = await db.execute(
        delete(Subscription)
        .where(Subscription.id.in_(ended))
        .execution_options(synchronize_session=False)
    )
    watches = await db.execute(
        delete(WatchedSession)
        .where(
            WatchedSession.active.is_(False),
            WatchedSession.updated_at < cutoff,
            ~exists().where(Subscription.session_id == WatchedSession.session_id),
            ~exists().where(
                OutboxMessage.session_id == WatchedSession.session_id,
                OutboxMessage.state == State.PENDING,
            ),
        )
        .execution_options(synchronize_session=False)
    )
    return rows_touched(subscriptions), rows_touched(watches)
