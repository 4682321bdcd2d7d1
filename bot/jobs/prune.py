"""Retention: finished outbox rows, alerts the error watch no longer lists, ended
subscriptions and watches nobody refers to any more are dropped, so the tables
(and the idle follow-up's walk over ended watches) stay small.

Cut-offs are the database's clock, like every other time the replicas share.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import delete, exists, func, select

from bot.outbox.contract.rows import State
from bot.outbox.table import OutboxMessage
from bot.runtime import Runtime
from bot.store.queries.follow_rules import prune_claims
from bot.store.queries.progress_points import prune_orphans
from bot.store.queries.session_metrics import prune_orphan_metrics
from bot.store.tables import (
    AlertAck,
    AlertSent,
    PersonalWatch,
    Subscription,
    WatchedSession,
    db_now,
)

DAY_SECONDS = 86400.0


async def prune_outbox(rt: Runtime) -> int:
    """Drop finished outbox rows past their retention; pending rows are never dropped.

    Remembered alerts go only once the error watch has not listed their error
    for as long: a session still in ERROR keeps its alert remembered. An
    acknowledgement goes with the age of its alert (it names the alert's row)."""
    cutoff = db_now(-rt.settings.outbox_retention_days * DAY_SECONDS)
    async with rt.sessionmaker() as db, db.begin():
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
    return _count(result)


async def prune_watches(rt: Runtime) -> tuple[int, int]:
    """Drop subscriptions that ended more than WATCH_RETENTION_DAYS ago, then the
    watched sessions that have been inactive as long and that no subscription
    refers to any more (with their chart points and W&B reads); returns how many
    of each.

    A subscription's outbox rows go with it (their dedupe keys name its id,
    which a new subscription may be given again), but one with a message still
    pending is kept until that is sent. A watched session is kept while any
    subscription names it, active or ended recently: its follow-up and `ls`
    still read it."""
    cutoff = db_now(-rt.settings.watch_retention_days * DAY_SECONDS)
    ended = select(Subscription.id).where(
        Subscription.active.is_(False),
        func.coalesce(Subscription.ended_at, Subscription.created_at) < cutoff,
        ~exists().where(
            OutboxMessage.subscription_id == Subscription.id, OutboxMessage.state == State.PENDING
        ),
    )
    async with rt.sessionmaker() as db, db.begin():
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
        # a session's chart points and W&B reads go with its watch
        await prune_orphans(db)
        await prune_orphan_metrics(db)
    return _count(subscriptions), _count(watches)


async def prune_follow(rt: Runtime) -> int:
    """Drop follow claims past WATCH_RETENTION_DAYS (their sessions have long left
    the live list, where only a claim matters) and the personal switch's sessions
    whose watch is gone; how many claims."""
    async with rt.sessionmaker() as db, db.begin():
        now = (await db.execute(select(db_now()))).scalar_one()
        claims = await prune_claims(
            db, before=now - timedelta(days=rt.settings.watch_retention_days)
        )
        await db.execute(
            delete(PersonalWatch)
            .where(~exists().where(WatchedSession.session_id == PersonalWatch.session_id))
            .execution_options(synchronize_session=False)
        )
    return claims


def _count(result: object) -> int:
    return int(getattr(result, "rowcount", 0) or 0)
