"""When a READY model resource became idle, and which watched sessions' resources
the subscribed follow-up looks at (bot/idle_watch.py): fast, no bot process."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from bot.alerts.idle import Candidate, attached_sessions, candidate, idle_since
from bot.together.client import TogetherClient, TogetherError
from bot.training.shapes import ModelResource, TrainingSession
from tests import together_fixtures
from tests.fakes import FakeTogether
from tests.fakes.together import make_model_resource

# the shared Together server and client fixtures (pytest finds them by these names)
fake = together_fixtures.fake
client = together_fixtures.client

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


# --- the subscribed sessions' follow-up: which watched sessions' resources to look at ----------

NOW = datetime(2026, 12, 1, 10, 0)  # naive UTC, as the database's times
RID = "7c3e4567-e89b-12d3-a456-426614174000"
FRESH = timedelta(seconds=120)


def spend(status: str = "READY", *, seen: datetime = NOW, rid: str = RID) -> dict[str, Any]:
    return {
        "resource_id": rid,
        "status": status,
        "resource": make_model_resource(rid, status),
        "price": {"currency": "USD", "price_per_hour": 25.0},
        "seen_at": seen.isoformat(),
    }


def look(status: str = "STOPPED", **progress: Any) -> Candidate | None:
    return candidate(
        "s1",
        last_status=f"TRAINING_SESSION_STATUS_{status}",
        progress=progress,
        snapshot={"model_resources_id": RID},
        now=NOW,
        fresh_for=FRESH,
    )


def test_a_running_or_creating_session_keeps_its_resource_out_of_the_follow_up() -> None:
    assert look("RUNNING", spend=spend()) is None
    assert look("CREATING", spend=spend()) is None
    assert look("RUNNING") is None


def test_a_fresh_spend_read_is_used_and_a_fresh_one_not_ready_ends_the_look() -> None:
    got = look("STOPPED", spend=spend())
    assert got is not None and got.fresh is not None and got.fresh.id == RID
    assert got.price is not None and got.price.price_per_hour == 25.0
    assert look("STOPPED", spend=spend("STOPPED")) is None
    # A stale read (the session has not been polled since it ended) is read again.
    stale = look("STOPPED", spend=spend(seen=NOW - timedelta(minutes=10)))
    assert stale is not None and stale.fresh is None


def test_without_the_spend_watch_the_snapshot_names_the_resource() -> None:
    got = look("ERROR")
    assert got is not None and got.resource_id == RID and got.fresh is None and got.price is None
    assert (
        candidate(
            "s1",
            last_status="STOPPED",
            progress=None,
            snapshot={"model_resources_id": "../x"},
            now=NOW,
            fresh_for=FRESH,
        )
        is None
    )


def test_a_follow_up_that_is_over_or_waits_is_left_alone() -> None:
    for done in ("alerted", "busy", "not ready"):
        assert look(idle_check={"resource_id": RID, "done": done}) is None
    later = (NOW + timedelta(minutes=5)).isoformat()
    assert look(idle_check={"resource_id": RID, "check_at": later}) is None
    due = (NOW - timedelta(seconds=1)).isoformat()
    assert look(idle_check={"resource_id": RID, "check_at": due}) is not None
    # A mark about another resource says nothing of this one.
    assert look(idle_check={"resource_id": "other", "done": "alerted"}) is not None


async def test_attached_sessions_reads_every_page(
    fake: FakeTogether, client: TogetherClient
) -> None:
    """250 stopped sessions on one resource and a running one on the third page:
    the resource is busy, which only reading every page can tell."""
    for i in range(250):
        fake.add(f"{i:08d}-e89b-12d3-a456-426614174000", "STOPPED", model_resources_id=RID)
    fake.add("f0000000-e89b-12d3-a456-426614174000", "RUNNING", model_resources_id=RID)
    fake.add("f1000000-e89b-12d3-a456-426614174000", "RUNNING")  # another resource
    resource_ = ModelResource.model_validate(make_model_resource(RID))
    sessions = await attached_sessions(client, RID, max_pages=5)
    assert len(sessions) == 251 and idle_since(resource_, sessions) is None
    lists = [parse_qs(urlsplit(p).query) for p in fake.paths]
    assert len(lists) == 3 and all(q["model_resources_id"] == [RID] for q in lists)
    with pytest.raises(TogetherError):  # a page not read must never make it look idle
        await attached_sessions(client, RID, max_pages=2)
