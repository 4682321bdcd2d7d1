"""Retention: finished outbox rows, alerts the error watch no longer lists, ended
subscriptions and watches nobody refers to any more are dropped, so the tables
(and the subscribed-idle watch's walk over ended watches) stay small.

Cut-offs are the database's clock, like every other time the replicas share.
"""

from __future__ import annotations

from bot.outbox.retention import drop_ended, drop_finished, drop_finished_redraws
from bot.runtime import Runtime
from bot.store.chart_tables import ProgressPoint, SessionMetrics
from bot.store.queries.watched_sessions import drop_unwatched_rows
from bot.store.rule_tables import RuleStateRow
from bot.store.tables import PersonalWatch, db_now

DAY_SECONDS = 86400.0
#: finished card redraws are kept an hour (the pace reads their last minute)
REDRAW_RETENTION_SECONDS = 3600.0


async def prune_outbox(rt: Runtime) -> int:
    """Drop finished outbox rows past their retention; pending rows are never dropped.

    Remembered alerts go only once the error watch has not listed their error
    for as long: a session still in ERROR keeps its alert remembered. An
    acknowledgement goes with the age of its alert (it names the alert's row)."""
    cutoff = db_now(-rt.settings.outbox_retention_days * DAY_SECONDS)
    async with rt.sessionmaker() as db, db.begin():
        redraws = await drop_finished_redraws(db, db_now(-REDRAW_RETENTION_SECONDS))
        return redraws + await drop_finished(db, cutoff)


async def prune_watches(rt: Runtime) -> tuple[int, int]:
    """Drop subscriptions that ended more than WATCH_RETENTION_DAYS ago, then the
    watched sessions that have been inactive as long and that no subscription
    refers to any more (with their chart points, W&B reads and where each metric
    rule stood on them); returns how many of each.

    A subscription's outbox rows go with it (their dedupe keys name its id,
    which a new subscription may be given again), but one with a message still
    pending is kept until that is sent. A watched session is kept while any
    subscription names it, active or ended recently: its check and `ls`
    still read it."""
    cutoff = db_now(-rt.settings.watch_retention_days * DAY_SECONDS)
    async with rt.sessionmaker() as db, db.begin():
        subscriptions, watches = await drop_ended(db, cutoff)
        # a session's chart points, W&B reads and rule states go with its watch
        await drop_unwatched_rows(db, ProgressPoint)
        await drop_unwatched_rows(db, SessionMetrics)
        await drop_unwatched_rows(db, RuleStateRow)
    return subscriptions, watches


async def prune_follow(rt: Runtime) -> int:
    """Drop the personal switch's sessions whose watch is gone; how many. (Follow
    claims are kept while their session is live: discovery, which lists who is,
    drops the others, `bot.jobs.follow`.)"""
    async with rt.sessionmaker() as db, db.begin():
        return await drop_unwatched_rows(db, PersonalWatch)
