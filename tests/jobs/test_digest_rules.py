"""What a channel's digest counts, on each database, from outbox rows written by
the builders the poller uses: status changes (told, or shown on the card only),
never a redraw of the card, and a row that cannot be read is skipped."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from sqlalchemy import insert

from bot.jobs.digests import digest_of_channel
from bot.outbox.contract.rows import OutboxRow, Thread, status_row, watch_row
from bot.outbox.queue import insert_outbox
from bot.outbox.table import OutboxMessage
from bot.simulated import make_session
from bot.store.engine import make_engine, make_sessionmaker
from bot.store.tables import ChannelSettings, db_now, utcnow
from bot.training.sessions import TrainingSession
from bot.training.snapshots import SessionSnapshot
from bot.training.transitions import Transition, gone

SID = "5e3e4567-e89b-12d3-a456-426614174000"
RUNNING = "TRAINING_SESSION_STATUS_RUNNING"
STOPPING = "TRAINING_SESSION_STATUS_STOPPING"


def rows() -> list[OutboxRow]:
    session = TrainingSession.model_validate(make_session(SID, display_name="the-run"))
    thread = Thread(1, SID, "C123", "1.000")
    change = Transition(old_status=RUNNING, new_status=STOPPING, ended=False)
    built = [
        status_row(thread, seq=1, transition=change, snapshot=None, told=True),
        status_row(thread, seq=2, transition=change, snapshot=None, told=False),  # muted
        status_row(thread, seq=3, transition=gone(STOPPING), snapshot=None, told=True),
        *(
            watch_row(thread, key=f"spend-{i}", session=session, view={"spend": i})
            for i in range(5)
        ),
    ]
    # No subscription row in these tests: the rows stand alone.
    return [dataclasses.replace(row, subscription_id=None) for row in built]


def digest(db_url: str) -> Any:
    async def go() -> Any:
        engine = make_engine(db_url)
        try:
            maker = make_sessionmaker(engine)
            async with maker() as db, db.begin():
                await insert_outbox(db, rows())
                # A row no longer readable (a payload that is not an object).
                await db.execute(
                    insert(OutboxMessage).values(
                        dedupe_key="odd",
                        kind="root",
                        channel_id="C123",
                        payload=["not", "an", "object"],
                        state="sent",
                        attempts=0,
                        next_attempt_at=db_now(),
                        created_at=db_now(),
                    )
                )
            setting = ChannelSettings(team_id="T1", channel_id="C123")
            async with maker() as db:
                return await digest_of_channel(db, setting, "2026-01-01", utcnow())
        finally:
            await engine.dispose()

    return asyncio.run(go())


def test_the_digest_counts_status_changes_and_no_card_redraw(db_url: str) -> None:
    changes = [(c.old_status, c.new_status) for c in digest(db_url).changes]
    assert changes == [(RUNNING, STOPPING), (RUNNING, STOPPING), (STOPPING, "GONE")]


def test_a_change_is_named_by_the_session_s_display_name(db_url: str) -> None:
    async def go() -> Any:
        engine = make_engine(db_url)
        try:
            maker = make_sessionmaker(engine)
            session = SessionSnapshot.of(
                TrainingSession.model_validate(make_session(SID, display_name="the-run"))
            )
            thread = Thread(1, SID, "C123", "1.000")
            change = Transition(old_status=RUNNING, new_status=STOPPING, ended=False)
            row = status_row(thread, seq=1, transition=change, snapshot=session, told=True)
            async with maker() as db, db.begin():
                await insert_outbox(db, [dataclasses.replace(row, subscription_id=None)])
            setting = ChannelSettings(team_id="T1", channel_id="C123")
            async with maker() as db:
                return await digest_of_channel(db, setting, "2026-01-01", utcnow())
        finally:
            await engine.dispose()

    assert [c.name for c in asyncio.run(go()).changes] == ["the-run"]
