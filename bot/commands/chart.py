"""`/rl-session chart <id> [metric …]` and the card's Chart button: a PNG of the
session into this channel's thread of it (or the channel, when it has none).

The session is read from what the poller stored when it is watched (no Together
request), else from Together. The person hears back only when something went
wrong or where the chart went; the chart's own words say what it shows.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from bot.charts.cache import shared_cache
from bot.charts.gather import chart_of
from bot.charts.upload import UploadRefused, upload_chart
from bot.commands.as_poll import fetch_for_user
from bot.commands.asker import Asker
from bot.runtime import Runtime
from bot.slack_web import SlackWeb
from bot.store.queries.chart_subscriptions import chart_thread
from bot.store.tables import WatchedSession
from bot.training.sessions import TrainingSession
from bot.training.snapshots import SessionSnapshot

log = logging.getLogger(__name__)

Say = Callable[[str], Awaitable[None]]


async def chart_here(
    rt: Runtime,
    slack: SlackWeb,
    asker: Asker,
    session_id: str,
    metrics: Sequence[str],
    say: Say,
    *,
    read: TrainingSession | None = None,
) -> str:
    """Draw and upload; returns the outcome to count. `read`: the session as just
    read from Together (resolving its name), used when the poller stored none."""
    async with rt.sessionmaker() as db:
        thread = await chart_thread(
            db, team_id=asker.team_id, channel_id=asker.channel_id, session_id=session_id
        )
        watched = await db.get(WatchedSession, session_id)
        snapshot = watched.snapshot if watched is not None else None
    fresh = read if read is not None and read.id == session_id else None
    session = _stored(snapshot) or fresh or await fetch_for_user(rt.together, session_id)
    chart = await chart_of(
        rt,
        shared_cache(),
        session,
        metrics=metrics,
        stall_minutes=thread.stall_after_minutes if thread is not None else None,
    )
    try:
        await upload_chart(
            slack,
            chart,
            channel=asker.channel_id,
            thread_ts=thread.root_ts if thread is not None else None,
        )
    except UploadRefused as exc:
        rt.metrics.charts.labels(outcome="failed").inc()
        await say(f":warning: {exc.words}")
        return "refused"
    rt.metrics.charts.labels(outcome="uploaded").inc()
    if thread is not None:
        await say(f":bar_chart: The chart of `{session.id}` is in this channel's thread of it.")
    return "ok"


def _stored(snapshot: SessionSnapshot | None) -> TrainingSession | None:
    return snapshot if snapshot is not None and snapshot.id else None
