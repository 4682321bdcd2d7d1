"""Queries on subscriptions: a channel's link to one session and its thread.

A subscription is found by its channel and session; it stays as a row after it
ends (`active` false) so a second subscribe can revive it with a new root. A
thread's options (`bot.subscriptions.options`) are written here, one setter each.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Row, exists, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.chart_tables import ChartRefusal, SessionMetrics
from bot.store.rule_tables import Budget
from bot.store.tables import SESSION_ENDED, PersonalWatch, Subscription, WatchedSession, utcnow
from bot.training.metrics_view import MetricsView
from bot.training.poll_progress import PollProgress
from bot.training.snapshots import SessionSnapshot


async def subscription_row(
    db: AsyncSession, team_id: str, channel_id: str, session_id: str
) -> Subscription | None:
    """This channel's subscription to the session, active or ended."""
    return (
        await db.execute(
            select(Subscription).where(
                Subscription.team_id == team_id,
                Subscription.channel_id == channel_id,
                Subscription.session_id == session_id,
            )
        )
    ).scalar_one_or_none()


async def active_subscription(
    db: AsyncSession, *, team_id: str, channel_id: str, session_id: str
) -> Subscription | None:
    """This channel's subscription to the session, unless it has ended."""
    row = await subscription_row(db, team_id, channel_id, session_id)
    return row if row is not None and row.active else None


async def channel_subscriptions(
    *, db: AsyncSession, team_id: str, channel_id: str
) -> list[tuple[Subscription, WatchedSession | None]]:
    """A channel's active subscriptions, oldest first, each with its watched session."""
    rows = await db.execute(
        select(Subscription, WatchedSession)
        .outerjoin(WatchedSession, WatchedSession.session_id == Subscription.session_id)
        .where(
            Subscription.team_id == team_id,
            Subscription.channel_id == channel_id,
            Subscription.active.is_(True),
        )
        .order_by(Subscription.created_at)
    )
    return [(s, w) for s, w in rows]


async def user_subscriptions(
    db: AsyncSession, *, user_id: str, limit: int = 100
) -> list[tuple[Subscription, WatchedSession | None]]:
    """A person's active subscriptions across channels, newest first (their Home tab)."""
    rows = await db.execute(
        select(Subscription, WatchedSession)
        .outerjoin(WatchedSession, WatchedSession.session_id == Subscription.session_id)
        .where(Subscription.subscribed_by == user_id, Subscription.active.is_(True))
        .order_by(Subscription.created_at.desc())
        .limit(limit)
    )
    return [(s, w) for s, w in rows]


async def set_mute(
    *,
    db: AsyncSession,
    team_id: str,
    channel_id: str,
    session_id: str,
    until: datetime | None,
) -> tuple[Subscription | None, bool]:
    """Mute (or, with None, unmute) this channel's subscription to a session.

    Also says whether it was muted before, so unmuting an unmuted thread is no news."""
    sub = await active_subscription(
        db, team_id=team_id, channel_id=channel_id, session_id=session_id
    )
    if sub is None:
        return None, False
    was_muted = sub.muted_until is not None and sub.muted_until > utcnow()
    sub.muted_until = until
    return sub, was_muted


async def set_target(db: AsyncSession, subscription_id: int, step: int) -> None:
    """A thread's target step (`subscribe <id> target=2000`), for the card's ETA."""
    await db.execute(
        update(Subscription).where(Subscription.id == subscription_id).values(target_step=step)
    )


async def set_stall(db: AsyncSession, subscription_id: int, minutes: int) -> None:
    """A thread's own stall threshold (`subscribe <id> stall=30m`; 0 is off)."""
    await db.execute(
        update(Subscription)
        .where(Subscription.id == subscription_id)
        .values(stall_after_minutes=minutes)
        .execution_options(synchronize_session=False)
    )


async def set_chart_on_end(db: AsyncSession, subscription_id: int, on: bool) -> None:
    """`subscribe <id> chart=end|off`: whether the thread gets a final chart."""
    await db.execute(
        update(Subscription)
        .where(Subscription.id == subscription_id)
        .values(chart_on_end=on)
        .execution_options(synchronize_session=False)
    )


async def set_routing(
    db: AsyncSession, subscription_id: int, *, broadcast: str | None, dm: str | None
) -> None:
    """Store a thread's `broadcast=` and `dm=` (None leaves one as it is; an
    empty `dm` turns the DMs off)."""
    values: dict[str, str | None] = {}
    if broadcast is not None:
        values["broadcast"] = broadcast
    if dm is not None:
        values["dm"] = dm or None
    if values:
        await db.execute(
            update(Subscription)
            .where(Subscription.id == subscription_id)
            .values(**values)
            .execution_options(synchronize_session=False)
        )


async def end_rows(db: AsyncSession, ids: list[int], *, reason: str) -> None:
    """Mark subscriptions ended, with why (`bot.subscriptions.service.end_subscriptions`
    also cancels what they owe and stops polling what nobody watches any more)."""
    await db.execute(
        update(Subscription)
        .where(Subscription.id.in_(ids))
        .values(active=False, ended_at=utcnow(), ended_reason=reason[:200])
        .execution_options(synchronize_session=False)
    )


async def stop_orphan_watches(db: AsyncSession, ids: list[int]) -> None:
    """Stop polling the sessions of these ended subscriptions that no active
    subscription follows any more. A session a person's App Home switch took is
    still told to them, so it stays watched."""
    session_ids = select(Subscription.session_id).where(Subscription.id.in_(ids))
    still_watched = exists().where(
        Subscription.session_id == WatchedSession.session_id, Subscription.active.is_(True)
    )
    still_personal = exists().where(PersonalWatch.session_id == WatchedSession.session_id)
    await db.execute(
        update(WatchedSession)
        .where(WatchedSession.session_id.in_(session_ids), ~still_watched, ~still_personal)
        .values(active=False)
        .execution_options(synchronize_session=False)
    )


async def threads_of_sessions(
    db: AsyncSession, session_ids: Sequence[str]
) -> Sequence[Row[int, str, str, str]]:
    """The threads that still hear about these sessions' resources: the active
    ones, and those whose session ended (where the team looks for what it left
    running). A thread that unsubscribed asked to hear nothing."""
    if not session_ids:
        return []
    rows = await db.execute(
        select(
            Subscription.id,
            Subscription.session_id,
            Subscription.channel_id,
            Subscription.root_ts,
        )
        .where(
            Subscription.session_id.in_(list(session_ids)),
            or_(Subscription.active.is_(True), Subscription.ended_reason == SESSION_ENDED),
        )
        .order_by(Subscription.id)
    )
    return rows.all()


async def first_threads(
    db: AsyncSession, session_ids: Sequence[str]
) -> dict[str, Row[str, str, str]]:
    """Each session's oldest thread, where an on-call page links back to."""
    if not session_ids:
        return {}
    rows = await db.execute(
        select(Subscription.session_id, Subscription.channel_id, Subscription.root_ts)
        .where(Subscription.session_id.in_(list(session_ids)))
        .order_by(Subscription.id)
    )
    threads: dict[str, Row[str, str, str]] = {}
    for row in rows:
        threads.setdefault(row.session_id, row)
    return threads


async def channel_watched(
    db: AsyncSession, *, team_id: str, channel_id: str
) -> Sequence[Row[str, SessionSnapshot | None, str]]:
    """The sessions a channel watches now: id, stored snapshot, last status."""
    rows = await db.execute(
        select(Subscription.session_id, WatchedSession.snapshot, WatchedSession.last_status)
        .join(WatchedSession, WatchedSession.session_id == Subscription.session_id)
        .where(
            Subscription.team_id == team_id,
            Subscription.channel_id == channel_id,
            Subscription.active.is_(True),
        )
    )
    return rows.all()


async def card_settings(
    db: AsyncSession, subscription_ids: Sequence[int]
) -> Sequence[
    Row[
        int,
        int | None,
        int | None,
        PollProgress | None,
        MetricsView,
        str,
        str | None,
        float | None,
        SessionSnapshot | None,
        bool,
        datetime | None,
    ]
]:
    """What these subscriptions' root cards show beyond the session: the
    thread's target step and stall threshold, its watched session's progress,
    what the bot last read of its W&B run (`view`, empty when never read), its
    workspace, whether that workspace refused the chart block (`refused` holds
    the team then), the channel's budget on the session (`amount`, None
    when none is set), the session as last stored (`snapshot`) with whether
    the subscription is still active (a redraw draws what is stored now), and
    until when its thread is muted."""
    if not subscription_ids:
        return []
    rows = await db.execute(
        select(
            Subscription.id,
            Subscription.target_step,
            Subscription.stall_after_minutes,
            WatchedSession.progress,
            SessionMetrics.view,
            Subscription.team_id,
            ChartRefusal.team_id.label("refused"),
            Budget.amount,
            WatchedSession.snapshot,
            Subscription.active,
            Subscription.muted_until,
        )
        .join(WatchedSession, WatchedSession.session_id == Subscription.session_id)
        .outerjoin(SessionMetrics, SessionMetrics.session_id == Subscription.session_id)
        .outerjoin(ChartRefusal, ChartRefusal.team_id == Subscription.team_id)
        .outerjoin(
            Budget,
            (Budget.team_id == Subscription.team_id)
            & (Budget.channel_id == Subscription.channel_id)
            & (Budget.session_id == Subscription.session_id),
        )
        .where(Subscription.id.in_(list(subscription_ids)))
    )
    return rows.all()


class SubscribedMeanwhile(Exception):
    """The ended subscription meant to be revived was revived by someone else."""


async def store_subscription(
    db: AsyncSession,
    *,
    team_id: str,
    channel_id: str,
    session_id: str,
    root: str,
    user_id: str,
    filters: str,
) -> int:
    """Insert the subscription, or revive an ended one; its id. Another replica doing
    the same shows as a `Duplicate` (insert) or `SubscribedMeanwhile` (revive)."""
    now = utcnow()
    row = await subscription_row(db, team_id, channel_id, session_id)
    if row is None:
        row = Subscription(
            team_id=team_id,
            channel_id=channel_id,
            session_id=session_id,
            root_ts=root,
            subscribed_by=user_id,
            created_at=now,
            active=True,
            filters=filters,
        )
        db.add(row)
    elif row.active:
        raise SubscribedMeanwhile
    else:
        row.root_ts, row.subscribed_by, row.created_at = root, user_id, now
        row.active, row.ended_at, row.ended_reason = True, None, None
        row.filters, row.muted_until = filters, None
    await db.flush()  # before start_watching(): its statements would autoflush this insert
    return row.id


async def subscription_by_id(db: AsyncSession, subscription_id: int) -> Subscription | None:
    return await db.get(Subscription, subscription_id)
