"""The steps the polls saw (`progress_points`): bounded, thinned past a thousand
points with the newest kept whole, and dropped with the watch. On both backends."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, insert, select

from bot.poll.record import moved_steps
from bot.store.chart_tables import ProgressPoint
from bot.store.engine import make_engine, make_sessionmaker
from bot.store.queries.progress_points import (
    KEEP_NEWEST,
    MAX_POINTS,
    record_steps,
    steps_of,
)
from bot.store.queries.watched_sessions import drop_unwatched_rows
from bot.store.tables import WatchedSession
from bot.training.poll_progress import PollProgress

T0 = datetime(2026, 12, 1, 10, 0)


def test_a_long_session_stays_bounded_and_keeps_its_shape(db_url: str) -> None:
    async def work() -> tuple[list[tuple[datetime, int]], int, int]:
        engine = make_engine(db_url)
        try:
            sessions = make_sessionmaker(engine)
            most = 0
            # the first 990 polls in one statement: thinning starts past MAX_POINTS
            prefill = MAX_POINTS - 10
            async with sessions() as db, db.begin():
                await db.execute(
                    insert(ProgressPoint),
                    [
                        {"session_id": "s1", "seen_at": T0 + timedelta(minutes=i), "step": i * 10}
                        for i in range(prefill)
                    ],
                )
                for i in range(0, prefill, 100):
                    await record_steps(db, {"s2": i}, now=T0 + timedelta(minutes=i))
            for i in range(prefill, 1500):
                async with sessions() as db, db.begin():
                    await record_steps(db, {"s1": i * 10}, now=T0 + timedelta(minutes=i))
                    if i % 100 == 0:
                        await record_steps(db, {"s2": i}, now=T0 + timedelta(minutes=i))
                if i % 50 == 0 or i > 1400:
                    async with sessions() as db:
                        count = await db.scalar(
                            select(func.count()).where(ProgressPoint.session_id == "s1")
                        )
                        most = max(most, int(count or 0))
            async with sessions() as db:
                points = await steps_of(db, "s1")
                other = len(await steps_of(db, "s2"))
            return points, most, other
        finally:
            await engine.dispose()

    points, most, other = asyncio.run(work())
    assert most <= MAX_POINTS and len(points) <= MAX_POINTS
    assert points[0][1] == 0 and points[-1][1] == 14990  # first and last kept
    newest = [step for _, step in points[-KEEP_NEWEST:]]
    assert newest == list(range(14990 - 10 * (KEEP_NEWEST - 1), 14991, 10))  # whole
    assert [s for _, s in points] == sorted(s for _, s in points)
    assert other == 15  # another session is untouched


def test_points_go_with_the_watch(db_url: str) -> None:
    async def work() -> tuple[int, list[tuple[datetime, int]]]:
        engine = make_engine(db_url)
        try:
            sessions = make_sessionmaker(engine)
            async with sessions() as db, db.begin():
                db.add(WatchedSession(session_id="kept", last_status="RUNNING", snapshot={}))
                await record_steps(db, {"kept": 1, "gone": 2}, now=T0)
            async with sessions() as db, db.begin():
                dropped = await drop_unwatched_rows(db, ProgressPoint)
            async with sessions() as db:
                return dropped, await steps_of(db, "kept")
        finally:
            await engine.dispose()

    dropped, kept = asyncio.run(work())
    assert dropped == 1 and [s for _, s in kept] == [1]


_read = PollProgress.model_validate


class _Row:
    def __init__(self, progress: Any) -> None:
        self.progress = progress


def test_only_a_step_that_moved_is_a_point() -> None:
    # what the poll hands over (the column's model), against what the row read
    seen = {"since": "2026-12-01T10:00:00", "seen_at": "2026-12-01T10:00:00", "running": True}
    owned = {
        "same": _Row(_read(seen | {"step": "5"})),
        "moved": _Row(_read(seen | {"step": "5"})),
        "first": _Row(None),
        "unknown": _Row(_read(seen | {"step": None})),
    }
    updates: dict[str, dict[str, Any]] = {
        "same": {"progress": _read(seen | {"step": "5"})},
        "moved": {"progress": _read(seen | {"step": "6"})},
        "first": {"progress": _read(seen | {"step": "1"})},
        "unknown": {"progress": _read(seen | {"step": None})},
        "not_owned": {"progress": _read(seen | {"step": "9"})},
    }
    assert moved_steps(owned, updates) == {"moved": 6, "first": 1}
