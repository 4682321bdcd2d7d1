"""The watched-session and W&B-read queries on a real database: a watch started
once and restarted from now, what is found by creator and progress, which
sessions are due a read and which reads go with their watch."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.simulated.together import make_session
from bot.store.chart_tables import SessionMetrics
from bot.store.queries.session_metrics import (
    due_sessions,
    view_of,
    write_view,
)
from bot.store.queries.watched_sessions import (
    created_watches,
    drop_unwatched_rows,
    start_watching,
    stored_progress,
)
from bot.store.tables import WatchedSession, utcnow
from bot.training.metrics_view import MetricsView
from bot.training.sessions import TrainingSession
from tests.support.store_rows import add_watch

Maker = async_sessionmaker[AsyncSession]
T0 = datetime(2026, 12, 1, 10, 0)
RUNNING = "TRAINING_SESSION_STATUS_RUNNING"
ERROR = "TRAINING_SESSION_STATUS_ERROR"
STOPPED = "TRAINING_SESSION_STATUS_STOPPED"


def _session(sid: str, status: str) -> TrainingSession:
    return TrainingSession.model_validate(make_session(sid, status))


async def _watch(maker: Maker, sid: str) -> WatchedSession:
    async with maker() as db:
        watch = await db.get(WatchedSession, sid)
    assert watch is not None
    return watch


async def test_a_new_watch_starts_from_what_together_says_with_its_first_poll_due(
    maker: Maker,
) -> None:
    before = utcnow()
    async with maker() as db, db.begin():
        await start_watching(db, _session("s1", RUNNING), first_poll_in=60)
    watch = await _watch(maker, "s1")
    assert (watch.active, watch.last_status, watch.transition_seq) == (True, RUNNING, 0)
    assert watch.snapshot is not None and watch.snapshot.id == "s1"
    assert before + timedelta(seconds=59) <= watch.next_poll_at <= utcnow() + timedelta(seconds=61)


async def test_a_live_watch_is_left_to_the_poller_and_a_stopped_one_restarts_from_now(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        await add_watch(db, "live", last_status="RUNNING", transition_seq=4, consecutive_failures=2)
        await add_watch(db, "stopped", active=False, last_status="RUNNING", consecutive_failures=3)
    async with maker() as db, db.begin():
        await start_watching(db, _session("live", ERROR), first_poll_in=0)
        await start_watching(db, _session("stopped", STOPPED), first_poll_in=0)
    live = await _watch(maker, "live")
    assert (live.last_status, live.transition_seq, live.consecutive_failures) == ("RUNNING", 4, 2)
    stopped = await _watch(maker, "stopped")
    assert (stopped.active, stopped.last_status, stopped.consecutive_failures) == (
        True,
        STOPPED,
        0,
    )


async def test_created_watches_are_active_watches_of_the_creators_asked(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await add_watch(db, "s1", snapshot={"id": "s1", "created_by": "alice"})
        await add_watch(db, "s2", snapshot={"id": "s2", "created_by": "bob"})
        await add_watch(db, "s3", snapshot={"id": "s3", "created_by": "alice"}, active=False)
        await add_watch(db, "s4", snapshot={})  # names no session: reads as none
    async with maker() as db:
        found = await created_watches(db, created_by=["alice", "carol"])
        assert await created_watches(db, created_by=[]) == []
    assert [w.session_id for w in found] == ["s1"]


async def test_stored_progress_reads_the_column_of_the_sessions_asked(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await add_watch(
            db, "s1", progress={"step": 40, "since": T0.isoformat(), "seen_at": T0.isoformat()}
        )
        await add_watch(db, "s2")  # no progress yet: left out
        await add_watch(
            db, "s3", progress={"step": 7, "since": T0.isoformat(), "seen_at": T0.isoformat()}
        )
    async with maker() as db:
        found = await stored_progress(db, ["s1", "s2"])
    assert list(found) == ["s1"]
    assert (found["s1"].step, found["s1"].since) == (40, T0)


async def test_a_view_is_written_and_read_back_with_its_time(maker: Maker) -> None:
    view = MetricsView(latest={"loss": 0.5}, last_step=12.0)
    async with maker() as db:
        assert await view_of(db, "s1") == (MetricsView(), None)
    async with maker() as db, db.begin():
        await write_view(db, "s1", view, read_at=T0)
    async with maker() as db, db.begin():
        read, at = await view_of(db, "s1")
        assert (read.latest, read.last_step, at) == ({"loss": 0.5}, 12.0, T0)
        # a second write replaces the first
        await write_view(db, "s1", MetricsView(error="no run"), read_at=T0 + timedelta(minutes=1))
    async with maker() as db:
        read, at = await view_of(db, "s1")
    assert (read.latest, read.error, at) == ({}, "no run", T0 + timedelta(minutes=1))


async def test_due_sessions_are_active_watches_never_read_first_then_oldest_read(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        for sid in ("a", "b", "c", "d", "e"):
            await add_watch(db, sid, active=sid != "e")
        db.add(SessionMetrics(session_id="a", read_at=T0 + timedelta(minutes=2), view=None))
        db.add(SessionMetrics(session_id="b", read_at=T0, view=None))
        db.add(SessionMetrics(session_id="c", read_at=T0 + timedelta(minutes=9), view=None))
    async with maker() as db:
        due = await due_sessions(db, before=T0 + timedelta(minutes=5), limit=10)
        first_two = await due_sessions(db, before=T0 + timedelta(minutes=5), limit=2)
    # d never read; b before a; c read after `before`; e not watched
    assert due == ["d", "b", "a"]
    assert first_two == ["d", "b"]


async def test_reads_of_sessions_no_longer_watched_are_pruned(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await add_watch(db, "kept", active=False)
        for sid in ("kept", "gone1", "gone2"):
            db.add(SessionMetrics(session_id=sid, read_at=T0, view=None))
    async with maker() as db, db.begin():
        assert await drop_unwatched_rows(db, SessionMetrics) == 2
    async with maker() as db:
        left = (await db.scalars(select(SessionMetrics.session_id))).all()
        assert await drop_unwatched_rows(db, SessionMetrics) == 0
    assert left == ["kept"]
