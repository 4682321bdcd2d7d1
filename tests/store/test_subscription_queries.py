"""The subscription queries on a real database: which channel's rows each one
reads, what ended subscriptions count for, and what the thread options write."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.store.chart_tables import ChartRefusal, SessionMetrics
from bot.store.queries.chart_subscriptions import chart_thread
from bot.store.queries.routing import DM_CREATOR, broadcast_modes, creator_dm_subscriptions
from bot.store.queries.subscriptions import (
    active_subscription,
    card_settings,
    channel_subscriptions,
    channel_watched,
    first_threads,
    set_chart_on_end,
    set_mute,
    set_routing,
    set_stall,
    set_target,
    subscription_row,
    threads_of_sessions,
    user_subscriptions,
)
from bot.store.rule_tables import Budget
from bot.store.tables import SESSION_ENDED, Subscription, utcnow
from bot.training.metrics_view import MetricsView
from bot.training.poll_progress import PollProgress
from tests.support.store_rows import CHANNEL, TEAM, add_subscription, add_watch

Maker = async_sessionmaker[AsyncSession]
T0 = datetime(2026, 12, 1, 10, 0)


async def test_a_channel_finds_its_own_subscription_active_or_ended(maker: Maker) -> None:
    async with maker() as db, db.begin():
        ended = await add_subscription(db, "s1", active=False, ended_reason="unsubscribed")
        await add_subscription(db, "s2", channel_id="C2")
    async with maker() as db:
        row = await subscription_row(db, TEAM, CHANNEL, "s1")
        assert row is not None and row.id == ended.id and not row.active
        assert (
            await active_subscription(db, team_id=TEAM, channel_id=CHANNEL, session_id="s1") is None
        )
        # another channel's subscription is not this channel's
        assert await subscription_row(db, TEAM, CHANNEL, "s2") is None
        other = await active_subscription(db, team_id=TEAM, channel_id="C2", session_id="s2")
        assert other is not None and other.session_id == "s2"


async def test_channel_subscriptions_are_the_active_ones_oldest_first_with_their_watch(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        await add_watch(db, "s2")
        await add_subscription(db, "s2", created_at=T0 + timedelta(minutes=2))
        await add_subscription(db, "s1", created_at=T0 + timedelta(minutes=1))
        await add_subscription(db, "s3", created_at=T0, active=False)
        await add_subscription(db, "s4", channel_id="C2", created_at=T0)
    async with maker() as db:
        found = await channel_subscriptions(db=db, team_id=TEAM, channel_id=CHANNEL)
    assert [(s.session_id, w.session_id if w else None) for s, w in found] == [
        ("s1", None),
        ("s2", "s2"),
    ]


async def test_user_subscriptions_span_channels_newest_first_and_stop_at_the_limit(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        await add_subscription(db, "s1", created_at=T0)
        await add_subscription(db, "s2", channel_id="C2", created_at=T0 + timedelta(minutes=1))
        await add_subscription(db, "s3", created_at=T0 + timedelta(minutes=2))
        await add_subscription(db, "s4", created_at=T0 + timedelta(minutes=3), active=False)
        await add_subscription(db, "s5", created_at=T0 + timedelta(minutes=4), subscribed_by="U2")
    async with maker() as db:
        mine = await user_subscriptions(db, user_id="U1")
        two = await user_subscriptions(db, user_id="U1", limit=2)
    assert [s.session_id for s, _ in mine] == ["s3", "s2", "s1"]
    assert [s.session_id for s, _ in two] == ["s3", "s2"]


async def test_mute_says_whether_the_thread_was_muted_before(maker: Maker) -> None:
    later = utcnow() + timedelta(hours=1)
    async with maker() as db, db.begin():
        await add_subscription(db, "s1")
        await add_subscription(db, "s2", active=False)
    async with maker() as db, db.begin():
        sub, was = await set_mute(
            db=db, team_id=TEAM, channel_id=CHANNEL, session_id="s1", until=later
        )
        assert sub is not None and not was
    async with maker() as db, db.begin():
        sub, was = await set_mute(
            db=db, team_id=TEAM, channel_id=CHANNEL, session_id="s1", until=None
        )
        assert sub is not None and was
    async with maker() as db:
        row = await subscription_row(db, TEAM, CHANNEL, "s1")
        assert row is not None and row.muted_until is None
        # an ended subscription cannot be muted
        assert await set_mute(
            db=db, team_id=TEAM, channel_id=CHANNEL, session_id="s2", until=later
        ) == (None, False)


async def test_a_mute_that_has_run_out_does_not_count_as_muted(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await add_subscription(db, "s1", muted_until=utcnow() - timedelta(minutes=1))
    async with maker() as db, db.begin():
        _, was = await set_mute(
            db=db, team_id=TEAM, channel_id=CHANNEL, session_id="s1", until=None
        )
    assert not was


async def test_target_stall_chart_and_routing_are_written_to_one_thread(maker: Maker) -> None:
    async with maker() as db, db.begin():
        sub = await add_subscription(db, "s1")
        other = await add_subscription(db, "s2")
    async with maker() as db, db.begin():
        await set_target(db, sub.id, 2000)
        await set_stall(db, sub.id, 30)
        await set_chart_on_end(db, sub.id, False)
        await set_routing(db, sub.id, broadcast="all", dm=DM_CREATOR)
    async with maker() as db:
        row = await db.get(Subscription, sub.id)
        untouched = await db.get(Subscription, other.id)
    assert row is not None and untouched is not None
    assert (row.target_step, row.stall_after_minutes, row.chart_on_end) == (2000, 30, False)
    assert (row.broadcast, row.dm) == ("all", "creator")
    assert (untouched.target_step, untouched.stall_after_minutes, untouched.chart_on_end) == (
        None,
        None,
        True,
    )
    assert (untouched.broadcast, untouched.dm) == (None, None)


async def test_routing_none_keeps_a_value_and_an_empty_dm_turns_dms_off(maker: Maker) -> None:
    async with maker() as db, db.begin():
        sub = await add_subscription(db, "s1", broadcast="errors", dm=DM_CREATOR)
    async with maker() as db, db.begin():
        await set_routing(db, sub.id, broadcast=None, dm=None)
    async with maker() as db:
        row = await db.get(Subscription, sub.id)
        assert row is not None and (row.broadcast, row.dm) == ("errors", "creator")
    async with maker() as db, db.begin():
        await set_routing(db, sub.id, broadcast=None, dm="")
    async with maker() as db:
        row = await db.get(Subscription, sub.id)
        assert row is not None and (row.broadcast, row.dm) == ("errors", None)


async def test_broadcast_modes_and_creator_dms_of_the_ids_asked(maker: Maker) -> None:
    async with maker() as db, db.begin():
        a = await add_subscription(db, "s1", broadcast="all", dm=DM_CREATOR)
        b = await add_subscription(db, "s2")
        ended = await add_subscription(db, "s3", dm=DM_CREATOR, active=False)
        unasked = await add_subscription(db, "s4", broadcast="all", dm=DM_CREATOR)
    async with maker() as db:
        ids = [a.id, b.id, ended.id]
        assert await broadcast_modes(db, ids) == {a.id: "all"}
        # ended ones count: their idle resources are still told
        assert await creator_dm_subscriptions(db, ids) == {a.id, ended.id}
        assert unasked.id not in await creator_dm_subscriptions(db, ids)
        assert await broadcast_modes(db, []) == {}
        assert await creator_dm_subscriptions(db, []) == set()


async def test_chart_thread_is_this_channels_active_subscription(maker: Maker) -> None:
    async with maker() as db, db.begin():
        sub = await add_subscription(db, "s1", stall_after_minutes=15)
        await add_subscription(db, "s2", active=False)
    async with maker() as db:
        thread = await chart_thread(db, team_id=TEAM, channel_id=CHANNEL, session_id="s1")
        assert thread is not None
        assert (thread.subscription_id, thread.root_ts, thread.stall_after_minutes) == (
            sub.id,
            sub.root_ts,
            15,
        )
        assert await chart_thread(db, team_id=TEAM, channel_id=CHANNEL, session_id="s2") is None
        assert await chart_thread(db, team_id=TEAM, channel_id="C2", session_id="s1") is None


async def test_threads_of_sessions_keep_ended_sessions_but_not_unsubscribed_ones(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        live = await add_subscription(db, "s1")
        ended = await add_subscription(
            db, "s1", channel_id="C2", active=False, ended_reason=SESSION_ENDED
        )
        await add_subscription(db, "s1", channel_id="C3", active=False, ended_reason="unsubscribed")
        await add_subscription(db, "s9")
    async with maker() as db:
        rows = await threads_of_sessions(db, ["s1"])
        assert [tuple(r) for r in rows] == [
            (live.id, "s1", CHANNEL, live.root_ts),
            (ended.id, "s1", "C2", ended.root_ts),
        ]
        assert await threads_of_sessions(db, []) == []


async def test_first_threads_are_each_sessions_oldest_whatever_its_state(maker: Maker) -> None:
    async with maker() as db, db.begin():
        first = await add_subscription(db, "s1", channel_id="C2", active=False)
        await add_subscription(db, "s1")
        only = await add_subscription(db, "s2")
    async with maker() as db:
        threads = await first_threads(db, ["s1", "s2", "s3"])
        assert await first_threads(db, []) == {}
    assert {sid: (r.channel_id, r.root_ts) for sid, r in threads.items()} == {
        "s1": ("C2", first.root_ts),
        "s2": (CHANNEL, only.root_ts),
    }


async def test_channel_watched_is_the_channels_active_watched_sessions(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await add_watch(
            db, "s1", last_status="ERROR", snapshot={"id": "s1", "display_name": "run one"}
        )
        await add_watch(db, "s2")
        await add_watch(db, "s3")
        await add_subscription(db, "s1")
        await add_subscription(db, "s2", active=False)
        await add_subscription(db, "s3", channel_id="C2")
        await add_subscription(db, "s4")  # no watch row: left out
    async with maker() as db:
        rows = await channel_watched(db, team_id=TEAM, channel_id=CHANNEL)
    assert [(sid, snap and snap.display_name, status) for sid, snap, status in rows] == [
        ("s1", "run one", "ERROR")
    ]


async def test_card_settings_join_progress_view_refusal_and_the_sessions_own_budget(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        await add_watch(db, "s1", progress={"step": 5})
        await add_watch(db, "s2")
        a = await add_subscription(db, "s1", target_step=100, stall_after_minutes=20)
        b = await add_subscription(db, "s2", team_id="T2")
        db.add(SessionMetrics(session_id="s1", read_at=T0, view={"metrics": {}}))
        db.add(ChartRefusal(team_id="T2", refused_at=T0, error="invalid_blocks"))
        db.add(
            Budget(
                team_id=TEAM,
                channel_id=CHANNEL,
                session_id="s1",
                amount=50.0,
                daily=False,
                created_by="U1",
            )
        )
        # another channel's budget on the same session is not this card's
        db.add(
            Budget(
                team_id=TEAM,
                channel_id="C2",
                session_id="s2",
                amount=9.0,
                daily=False,
                created_by="U1",
            )
        )
    async with maker() as db:
        found = {r[0]: tuple(r) for r in await card_settings(db, [a.id, b.id])}
        assert await card_settings(db, []) == []
    # the session as stored, whether the subscription is active, until when it is muted
    tails = {
        k: (v[8].id if v[8] else None, v[8].status if v[8] else None, *v[9:])
        for k, v in found.items()
    }
    assert tails == {a.id: ("s1", "RUNNING", True, None), b.id: ("s2", "RUNNING", True, None)}
    rows = {k: v[:8] for k, v in found.items()}
    assert rows == {
        # a view of an older shape reads as what it still says (nothing); none read: empty
        a.id: (a.id, 100, 20, PollProgress(step=5), MetricsView(), TEAM, None, 50.0),
        b.id: (b.id, None, None, None, MetricsView(), "T2", "T2", None),
    }
