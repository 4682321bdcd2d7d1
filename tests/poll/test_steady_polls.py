"""A poll whose row is the one the stored state was built from (its fingerprint,
`RawSession`) writes only what moves with time; any other is judged whole.

The rules are pure (`RawSession`); what a poll writes is checked through
`record_outcomes` on each database, as the poller calls it, with a row leased to
this replica."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.outbox.table import OutboxMessage
from bot.poll.fetch import Fetched
from bot.poll.record import record_outcomes
from bot.settings.model import Settings
from bot.simulated import make_session
from bot.store.engine import make_engine, make_sessionmaker
from bot.store.tables import WatchedSession, db_now, utcnow
from bot.together.answers import raw_sessions
from bot.together.errors import TogetherError
from bot.training.sessions import HEAD_FIELDS, RawSession, TrainingSession
from bot.training.snapshots import seen_state
from tests.support import examples, watched_rows

SID = "123e4567-e89b-12d3-a456-426614174000"
OWNER = "replica-a"
T = TypeVar("T")

# --- the row's head and fingerprint (pure) ------------------------------------------------


def test_the_same_row_has_the_same_fingerprint_and_any_change_another() -> None:
    row = make_session(SID, step="42")
    assert RawSession.of(row).fingerprint == RawSession.of(dict(row)).fingerprint
    for changed in (
        make_session(SID, step="43"),
        make_session(SID, "STOPPING", step="42"),
        make_session(SID, step="42", checkpoints=2),
        {**row, "display_name": "renamed"},
    ):
        assert RawSession.of(changed).fingerprint != RawSession.of(row).fingerprint


def test_a_row_held_as_text_reads_back_as_it_came() -> None:
    raw = RawSession.of(make_session(SID, step="12345678901234567"))
    again = RawSession.from_text(raw.text)
    assert again.fingerprint == raw.fingerprint and again.head == raw.head
    assert again.session() == TrainingSession.model_validate(
        make_session(SID, step="12345678901234567")
    )


_odd = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=30),
    st.sampled_from(
        [
            "RUNNING",
            "TRAINING_SESSION_STATUS_ERROR",
            "",
            "2026-12-01T10:00:00Z",
            "12345678901234567",
        ]
    ),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=examples(200), deadline=None)
@given(status=_odd, step=_odd, created_at=_odd, resource=_odd, display_name=_odd, lora=_odd)
def test_the_head_agrees_with_the_whole_model_on_any_values(
    status: Any, step: Any, created_at: Any, resource: Any, display_name: Any, lora: Any
) -> None:
    row = make_session(SID) | {
        "status": status,
        "step": step,
        "created_at": created_at,
        "model_resources_id": resource,
        "display_name": display_name,
        "lora_config": lora,
    }
    [raw] = raw_sessions([row])
    whole = TrainingSession.model_validate(row)
    assert raw.session() == whole
    for name in HEAD_FIELDS:
        assert getattr(raw.head, name) == getattr(whole, name), name


def test_a_row_without_a_usable_id_is_skipped_like_before() -> None:
    rows = [make_session(SID), {"id": 7}, {"status": "RUNNING"}, "text", make_session("other-id")]
    assert [r.id for r in raw_sessions(rows)] == [SID, "other-id"]


# --- what a poll writes (each database) ---------------------------------------------------


def _run(db_url: str, work: Callable[[Any], Awaitable[T]]) -> T:
    async def go() -> T:
        engine = make_engine(db_url)
        try:
            return await work(make_sessionmaker(engine))
        finally:
            await engine.dispose()

    return asyncio.run(go())


SETTINGS = Settings(_env_file=None, stall_after_minutes=15)


async def _lease(maker: Any) -> None:
    async with maker() as db, db.begin():
        await db.execute(
            update(WatchedSession)
            .where(WatchedSession.session_id == SID)
            .values(lease_owner=OWNER, lease_until=db_now(60))
        )


async def _poll(maker: Any, fetched: Fetched) -> None:
    await _lease(maker)
    async with maker() as db, db.begin():
        await record_outcomes(db, {SID: fetched}, owner=OWNER, settings=SETTINGS, interval=30)


async def _stored(db: AsyncSession) -> WatchedSession:
    return (
        await db.execute(select(WatchedSession).where(WatchedSession.session_id == SID))
    ).scalar_one()


async def _watch(maker: Any, session: TrainingSession) -> None:
    async with maker() as db, db.begin():
        db.add_all(watched_rows(session))


def _rows(maker: Any) -> Awaitable[list[OutboxMessage]]:
    async def go() -> list[OutboxMessage]:
        async with maker() as db:
            return list((await db.execute(select(OutboxMessage))).scalars())

    return go()


def test_a_steady_poll_writes_only_what_moves_and_a_change_after_it_is_told_once(
    db_url: str,
) -> None:
    running = make_session(SID, step="42")

    async def work(maker: Any) -> None:
        await _watch(maker, TrainingSession.model_validate(running))
        await _poll(maker, RawSession.of(running))  # no fingerprint stored: judged whole
        async with maker() as db, db.begin():
            stored = await _stored(db)
            assert stored.fingerprint == RawSession.of(running).fingerprint
            assert stored.lease_owner is None
            # Mark the stored snapshot: a steady poll must leave it as it is.
            assert stored.snapshot is not None
            stored.snapshot = stored.snapshot.model_copy(update={"display_name": "as-stored"})
            first_seen = stored.progress
        await _poll(maker, RawSession.of(running))
        async with maker() as db:
            stored = await _stored(db)
            assert stored.snapshot.display_name == "as-stored"
            assert stored.progress != first_seen  # when it was last seen moved on
            assert stored.lease_owner is None and stored.transition_seq == 0
        assert await _rows(maker) == []

        moved = make_session(SID, step="43")  # the step moved: judged whole again
        await _poll(maker, RawSession.of(moved))
        async with maker() as db:
            stored = await _stored(db)
            assert stored.snapshot.display_name != "as-stored"
            assert stored.snapshot is not None and stored.snapshot.step == 43
            assert stored.fingerprint == RawSession.of(moved).fingerprint

        stopping = make_session(SID, "STOPPING", step="43")
        for _ in range(3):  # the change, then the same row twice: told once
            await _poll(maker, RawSession.of(stopping))
        rows = await _rows(maker)
        assert len(rows) == 1 and "STOPPING" in str(rows[0].payload)
        async with maker() as db:
            assert (await _stored(db)).transition_seq == 1

    _run(db_url, work)


def test_a_row_like_the_stored_one_is_judged_whole_after_a_failure_or_another_writer(
    db_url: str,
) -> None:
    running = make_session(SID, step="42")

    async def work(maker: Any) -> None:
        await _watch(maker, TrainingSession.model_validate(running))
        await _poll(maker, RawSession.of(running))
        await _poll(maker, TogetherError("unavailable", "timed out"))
        async with maker() as db, db.begin():
            stored = await _stored(db)
            assert stored.consecutive_failures == 1
            assert stored.snapshot is not None
            stored.snapshot = stored.snapshot.model_copy(update={"display_name": "as-stored"})
        await _poll(maker, RawSession.of(running))  # clears the failure: whole
        async with maker() as db, db.begin():
            stored = await _stored(db)
            assert stored.consecutive_failures == 0 and stored.last_failure is None
            assert stored.snapshot.display_name != "as-stored"
            # Another writer (a re-subscribe) stores a state from elsewhere: no fingerprint.
            seen = seen_state(TrainingSession.model_validate(running))
            for key, value in seen.items():
                setattr(stored, key, value)
            # (the state is written as the dicts it is built as)
            stored.snapshot = seen["snapshot"] | {"display_name": "as-stored"}
        async with maker() as db:
            assert (await _stored(db)).fingerprint is None
        await _poll(maker, RawSession.of(running))
        async with maker() as db:
            assert (await _stored(db)).snapshot.display_name != "as-stored"

    _run(db_url, work)


def test_a_steady_creating_session_is_still_judged_for_a_slow_start(db_url: str) -> None:
    """The stall watch owes CREATING sessions a look on every poll: never steady."""
    creating = make_session(SID, "CREATING", created_at="2026-01-01T00:00:00Z")

    async def work(maker: Any) -> None:
        await _watch(maker, TrainingSession.model_validate(creating))
        await _poll(maker, RawSession.of(creating))
        async with maker() as db, db.begin():
            (await _stored(db)).snapshot = {"id": SID, "display_name": "as-stored"}
        await _poll(maker, RawSession.of(creating))
        async with maker() as db:
            assert (await _stored(db)).snapshot.display_name != "as-stored"

    _run(db_url, work)


def test_a_session_steady_for_the_stall_threshold_is_told_stalled(db_url: str) -> None:
    running = make_session(SID, step="42")

    async def work(maker: Any) -> None:
        await _watch(maker, TrainingSession.model_validate(running))
        await _poll(maker, RawSession.of(running))
        await _poll(maker, RawSession.of(running))
        async with maker() as db, db.begin():
            # The step has not moved for longer than the threshold (16 minutes ago).
            stored = await _stored(db)
            progress = dict(stored.progress or {})
            then = (utcnow() - timedelta(minutes=16)).isoformat()
            for key in ("since", "seen_at", "moved_at"):
                if key in progress:
                    progress[key] = then
            stored.progress = progress
        await _poll(maker, RawSession.of(running))
        rows = await _rows(maker)
        assert any("stall" in str(r.payload).lower() for r in rows), [r.payload for r in rows]

    _run(db_url, work)
