"""When a READY model resource became idle, and which watched sessions' resources
the subscribed-idle watch looks at (bot/alerts/idle.py, bot/alerts/subscribed_idle.py):
fast, no bot process."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from bot.alerts.idle import attached_sessions, idle_since
from bot.alerts.stall import check as stall_check
from bot.alerts.subscribed_idle import ENDED, candidate, final_answer, waiting
from bot.simulated import FakeTogether
from bot.simulated.together import make_model_resource
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.training.poll_progress import PollProgress
from bot.training.resources import ModelResource
from bot.training.rules import Progress, idles_out_at
from bot.training.sessions import TrainingSession
from bot.training.snapshots import SessionSnapshot
from bot.training.status import ResourceStatus
from bot.training.time_bounds import later, naive_utc, span
from tests import together_fixtures
from tests.support.subscribed_idle import FRESH, NOW, RID, look, spend

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


# --- the subscribed sessions' check: which watched sessions' resources to look at ----------


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
            progress=PollProgress.model_validate(None),
            snapshot=SessionSnapshot(id="s1", model_resources_id="../x"),
            now=NOW,
            fresh_for=FRESH,
        )
        is None
    )


def test_a_follow_up_that_is_over_or_waits_is_left_alone() -> None:
    for done in ("alerted", "busy", "stopped", "error"):
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


def test_a_resource_not_ready_yet_is_looked_at_again_a_quarter_threshold_later() -> None:
    after = timedelta(minutes=20)
    for status in (ResourceStatus.PENDING, ResourceStatus.CREATING, ResourceStatus.STOPPING):
        mark = waiting(status, now=NOW, after=after).dump()
        assert "done" not in mark and mark["waiting"] == status.value
        assert mark["check_at"] == (NOW + timedelta(minutes=5)).isoformat()
        assert look(idle_check={"resource_id": RID} | mark) is None  # not before then
    assert {ResourceStatus.STOPPED, ResourceStatus.ERROR} == ENDED


# --- Together's dates and timeouts at the edges of what a datetime holds -----------------------

INT64_MAX = 9223372036854775807


def test_a_huge_inactive_timeout_clamps_the_idle_out_time() -> None:
    progress = Progress(step=5, since=datetime(2026, 12, 1, 10, 0), running=True)
    at = idles_out_at(progress, expires_at=None, inactive_timeout=INT64_MAX)
    assert at == datetime.max
    assert idles_out_at(progress, expires_at=None, inactive_timeout=60) == datetime(
        2026, 12, 1, 10, 1
    )


def test_time_sums_from_outside_clamp_instead_of_overflowing() -> None:
    end = datetime(9999, 12, 31, 23, 59, 59)
    assert later(end, timedelta(minutes=20)) == datetime.max
    assert later(datetime(1, 1, 1, tzinfo=UTC), -timedelta(days=1)) == datetime.min.replace(
        tzinfo=UTC
    )
    assert later(NOW, timedelta(minutes=1)) == NOW + timedelta(minutes=1)
    assert span(INT64_MAX) == timedelta.max
    assert span(-INT64_MAX) == timedelta.min
    assert span(float("nan")) == timedelta(0) and span(90) == timedelta(seconds=90)
    # A date at the edge, with an offset, is past the edge in UTC.
    assert naive_utc(datetime.fromisoformat("9999-12-31T23:59:59-05:00")) == datetime.max
    assert naive_utc(datetime.fromisoformat("0001-01-01T00:00:00+05:00")) == datetime.min
    ready_at_the_end = resource("9999-12-31T23:59:59-05:00")
    assert idle_since(ready_at_the_end, []) == datetime.max


def test_a_stalled_session_with_impossible_dates_still_gets_its_check() -> None:
    stored = {
        "step": "5",
        "since": "2026-12-01T09:00:00",
        "running": True,
        "seen_at": "2026-12-01T09:59:00",
        "spend": {
            "status": "READY",
            "resource": {"expires_at": "9999-12-31T23:59:59-05:00", "inactive_timeout": INT64_MAX},
        },
    }
    running = TrainingSession(
        id="s",
        status="TRAINING_SESSION_STATUS_RUNNING",
        step=5,
        created_at="0001-01-01T00:00:00+05:00",
    )
    _, got = stall_check(PollProgress.model_validate(stored), running, now=NOW)
    assert got is not None and got.expires_at == datetime.max
    assert got.created_at == datetime.min and got.inactive_timeout == INT64_MAX


def test_only_an_answer_that_asking_again_cannot_change_ends_the_follow_up() -> None:
    assert final_answer(TogetherError("not_found", status=404)) == "gone"
    assert final_answer(TogetherError("invalid_id")) == "refused"
    assert final_answer(TogetherError("bad_response", status=400)) == "refused"
    for retry in (
        TogetherError("bad_response", "body is not JSON", status=200),
        TogetherError("unavailable", "HTTP 404 without Together's error", status=404),
        TogetherError("unavailable", status=503),
        TogetherError("rate_limited", status=429),
        TogetherError("auth", status=401),
    ):
        assert final_answer(retry) is None
    assert look(idle_check={"resource_id": RID, "done": "gone"}) is None
