"""When a READY model resource became idle (bot/idle_watch.py): pure, fast."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.idle_watch import idle_since
from bot.models import ModelResource, TrainingSession

T = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def resource(updated: str | None = "2026-12-01T09:00:00Z") -> ModelResource:
    return ModelResource(id="r1", status="MODEL_RESOURCES_STATUS_READY", updated_at=updated)


def session(status: str, updated: str) -> TrainingSession:
    return TrainingSession(id="s", status=f"TRAINING_SESSION_STATUS_{status}", updated_at=updated)


def test_idle_since_the_last_session_stopped_or_the_resource_became_ready() -> None:
    stopped = [session("STOPPED", "2026-12-01T09:30:00Z"), session("ERROR", "2026-12-01T09:10:00Z")]
    assert idle_since(resource(), stopped) == datetime(2026, 12, 1, 9, 30)  # naive UTC
    assert idle_since(resource(), []) == datetime(2026, 12, 1, 9, 0)
    assert idle_since(resource(None), []) is None


def test_an_active_session_keeps_it_busy() -> None:
    for status in ("RUNNING", "CREATING"):
        busy = [session("STOPPED", "2026-12-01T09:30:00Z"), session(status, "2026-12-01T09:00:00Z")]
        assert idle_since(resource(), busy) is None
