"""The typed JSON columns (`bot.store.typed_json.PydanticJSON`) on a real database:
what the bot writes is the JSON it always wrote, read back as the model; rows of
older versions (or odd by hand) read without raising."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.outbox.contract.payloads import CheckpointsPayload
from bot.simulated.together import make_session
from bot.store.chart_tables import SessionMetrics
from bot.store.queries.watched_sessions import created_watches, start_watching
from bot.store.tables import WatchedSession
from bot.store.typed_json import PydanticJSON
from bot.training.metrics_view import MetricsView
from bot.training.poll_progress import PollProgress
from bot.training.sessions import TrainingSession
from bot.training.snapshots import SessionSnapshot, trimmed_snapshot
from bot.training.transitions import CheckpointNews, checkpoint_keys, checkpoint_news
from tests.support.store_rows import add_watch

Maker = async_sessionmaker[AsyncSession]
T0 = datetime(2026, 12, 1, 10, 0)


def _raw(value: Any) -> Any:
    """A JSON column as the driver hands it over untyped: text on both backends."""
    return json.loads(value) if isinstance(value, str) else value


async def test_a_watch_is_written_as_the_json_it_always_was_and_read_as_models(
    maker: Maker,
) -> None:
    session = TrainingSession.model_validate(
        make_session("s1", checkpoints=8, metadata={"wandb": {"entity": "e", "project": "p"}})
    )
    progress = PollProgress(step=7, since=T0, running=True, rate=1.5, seen_at=T0)
    async with maker() as db, db.begin():
        await start_watching(db, session, first_poll_in=0)
        watch = await db.get(WatchedSession, "s1")
        assert watch is not None
        watch.progress = progress
        db.add(SessionMetrics(session_id="s1", view=MetricsView(latest={"reward": 0.5})))
    async with maker() as db:
        raw = (
            await db.execute(
                text(
                    "SELECT w.snapshot, w.progress, m.view FROM watched_sessions w "
                    "JOIN session_metrics m ON m.session_id = w.session_id"
                )
            )
        ).one()
        watch = await db.get(WatchedSession, "s1")
        view = await db.get(SessionMetrics, "s1")
    # the same keys and values as the dicts written before the columns were typed
    assert _raw(raw[0]) == trimmed_snapshot(session)
    assert _raw(raw[1]) == progress.dump()
    assert _raw(raw[2]) == MetricsView(latest={"reward": 0.5}).dump()
    assert watch is not None and view is not None
    assert watch.snapshot == SessionSnapshot.of(session)
    assert watch.snapshot is not None and watch.snapshot.metadata == {
        "wandb": {"entity": "e", "project": "p"}
    }
    assert watch.progress == progress
    assert view.view.latest == {"reward": 0.5}


async def test_old_and_odd_rows_read_without_raising(maker: Maker) -> None:
    # Written as they are (a dict is the column's JSON already), as older versions did.
    async with maker() as db, db.begin():
        # an old snapshot: fields missing, fields unknown, one of the wrong type
        await add_watch(
            db,
            "old",
            snapshot={"id": "old", "created_by": "alice", "step": "x", "gone_field": [1]},
            progress={"step": "12", "since": "2026-12-01T10:00:00", "seen_at": "late"},
        )
        await add_watch(db, "no-id", snapshot={"created_by": "alice"}, progress=[1, 2])
        await add_watch(db, "a-list", snapshot=[1, 2], progress="x")
        db.add(SessionMetrics(session_id="old", view={"latest": {"reward": "x"}}))
        db.add(SessionMetrics(session_id="no-id", view=None))
    async with maker() as db:
        rows = {w.session_id: w for w in (await db.scalars(select(WatchedSession))).all()}
        views = {m.session_id: m.view for m in (await db.scalars(select(SessionMetrics))).all()}
        found = await created_watches(db, created_by=["alice"])
    old = rows["old"].snapshot
    assert old is not None and (old.id, old.created_by, old.step) == ("old", "alice", None)
    assert old.model_extra == {"gone_field": [1]}
    # the step's fields read together: one unreadable, the step is unknown
    assert rows["old"].progress == PollProgress()
    assert rows["no-id"].snapshot is None and rows["a-list"].snapshot is None
    assert rows["no-id"].progress == PollProgress() == rows["a-list"].progress
    assert views == {"old": MetricsView(), "no-id": MetricsView()}
    assert [w.session_id for w in found] == ["old"]


def test_the_type_dumps_a_model_passes_json_through_and_reads_null_as_missing() -> None:
    column = PydanticJSON(PollProgress, missing=lambda: None)
    progress = PollProgress(step=2**62 + 1, since=T0, seen_at=T0)
    dumped = column.process_bind_param(progress, None)  # type: ignore[arg-type]
    assert dumped == progress.dump() and dumped["step"] == str(2**62 + 1)
    assert column.process_bind_param({"step": "1"}, None) == {"step": "1"}  # type: ignore[arg-type]
    assert column.process_bind_param(None, None) is None  # type: ignore[arg-type]
    assert column.process_result_value(dumped, None) == progress  # type: ignore[arg-type]
    assert column.process_result_value(None, None) is None  # type: ignore[arg-type]
    views = PydanticJSON(MetricsView, missing=MetricsView)
    assert views.process_result_value([1], None) == MetricsView()  # type: ignore[arg-type]


def test_checkpoint_news_is_stored_as_the_items_always_were_and_old_items_read() -> None:
    before = TrainingSession.model_validate(make_session("s1", checkpoints=1))
    after = TrainingSession.model_validate(make_session("s1", checkpoints=2))
    news = checkpoint_news(checkpoint_keys(before), after)
    assert news and all(isinstance(n, CheckpointNews) for n in news)
    stored = CheckpointsPayload(items=news).model_dump(mode="json", exclude={"kind"})
    assert list(stored["items"][0]) == ["kind", "id", "step", "created_at", "registered", "event"]
    assert CheckpointsPayload.model_validate(stored).items == news
    # an item of an older or odd row: an unknown kind is an inference checkpoint
    odd = CheckpointsPayload.model_validate(
        {"items": [{"kind": "lora", "id": "c", "step": "9", "registered": [3], "event": "?"}]}
    )
    assert odd.items == [CheckpointNews(kind="inference", id="c", step=9, event="new")]
