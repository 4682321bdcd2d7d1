"""The `watched_sessions.progress` column (`bot.training.poll_progress`): the JSON the
watches have always written reads back and writes out unchanged, and odd values
read tolerantly. Pure: no process, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.outbox.contract.payloads import RootPayload
from bot.simulated.together import make_model_resource
from bot.training.poll_progress import CardView, IdleCheck, PollProgress, SpendRead
from bot.training.resources import CostEstimate, ModelResource
from bot.training.rules import Progress

NOW = datetime(2026, 12, 1, 10, 0)  # the database's naive UTC
RID = "7c3e4567-e89b-12d3-a456-426614174000"

STEP = {
    "step": "12345678901234567",
    "since": "2026-12-01T09:40:00",
    "running": True,
    "rate": 12.5,
    "anchored": True,
    "seen_at": "2026-12-01T10:00:00.123456",
}
SPEND = {
    "resource_id": RID,
    "status": "READY",
    "resource": ModelResource.model_validate(
        make_model_resource(RID, "READY", now=datetime(2026, 12, 1, 9, 0, tzinfo=UTC))
    ).model_dump(mode="json", exclude_none=True),
    "price": {"currency": "USD", "price_per_hour": 12.0},
    "ready_seconds": 1800.0,
    "seen_at": "2026-12-01T10:00:00",
}
MARKS: list[dict[str, Any]] = [
    {"resource_id": RID, "done": "alerted", "idle_since": "2026-12-01T09:00:00+00:00"},
    {"resource_id": RID, "done": "busy"},
    {"resource_id": RID, "waiting": "PENDING", "check_at": "2026-12-01T10:05:00"},
    {
        "resource_id": RID,
        "check_at": "2026-12-01T10:20:00+00:00",
        "idle_since": "2026-12-01T10:00:00+00:00",
    },
]

TODAYS_SHAPES: list[dict[str, Any]] = [
    STEP,
    STEP | {"step": None, "rate": None, "running": False, "anchored": False},
    STEP | {"spend": SPEND},
    STEP | {"spend": SPEND | {"price": None, "status": "PENDING", "ready_seconds": 0.0}},
    *({"idle_check": mark} for mark in MARKS),
    *(STEP | {"spend": SPEND, "idle_check": mark} for mark in MARKS),
]


@pytest.mark.parametrize("stored", TODAYS_SHAPES)
def test_todays_column_reads_back_and_writes_out_unchanged(stored: dict[str, Any]) -> None:
    assert PollProgress.model_validate(stored).dump() == stored
    assert PollProgress.model_validate(stored).model_dump(mode="json") == stored


@pytest.mark.parametrize("stored", TODAYS_SHAPES[:4])
def test_a_cards_view_in_a_payload_reads_back_unchanged(stored: dict[str, Any]) -> None:
    for shown in (stored, stored | {"target": 2000, "eta": None}):
        shown = shown | ({"eta": "2026-12-01T11:00:00"} if "target" in shown else {})
        payload = RootPayload(old_status="S", new_status="S", watch=shown)
        assert payload.watch is not None and payload.watch.dump() == shown
        assert payload.model_dump(mode="json")["watch"] == shown
        again = RootPayload.model_validate(payload.model_dump(mode="json"))
        assert again.watch == payload.watch


def test_what_the_watches_write_is_what_they_always_wrote() -> None:
    progress = Progress(step=5, since=NOW, running=True, rate=None, anchored=False)
    resource = ModelResource.model_validate(make_model_resource(RID, "READY"))
    price = CostEstimate(currency="USD", price_per_hour=3.0)
    spend = SpendRead.of(resource, price, ready_seconds=60.0, seen_at=NOW)
    written = PollProgress.seen(progress, NOW, spend=spend).dump()
    assert written == {
        "step": "5",
        "since": NOW.isoformat(),
        "running": True,
        "rate": None,
        "anchored": False,
        "seen_at": NOW.isoformat(),
        "spend": {
            "resource_id": RID,
            "status": "READY",
            "resource": resource.model_dump(mode="json", exclude_none=True),
            "price": price.model_dump(mode="json"),
            "ready_seconds": 60.0,
            "seen_at": NOW.isoformat(),
        },
    }
    assert PollProgress.model_validate(written) == PollProgress.seen(progress, NOW, spend=spend)
    mark = IdleCheck.model_construct(resource_id=RID, waiting="PENDING", check_at=NOW)
    assert mark.dump() == {"resource_id": RID, "waiting": "PENDING", "check_at": NOW.isoformat()}
    view = CardView.of(PollProgress.seen(progress, NOW), target=10, eta=NOW + timedelta(hours=1))
    without_spend = {k: v for k, v in written.items() if k != "spend"}
    assert view.dump() == without_spend | {"target": 10, "eta": "2026-12-01T11:00:00"}


@pytest.mark.parametrize(
    "odd",
    [None, "x", 3, [], {}, {"since": "yesterday", "seen_at": "now"}, {"step": "a"}, {"step": {}}],
)
def test_an_unreadable_column_is_a_first_look(odd: Any) -> None:
    read = PollProgress.model_validate(odd)
    assert read.progress() is None and read.spend is None and read.idle_check is None


def test_one_unreadable_step_field_drops_the_step_but_keeps_the_rest() -> None:
    stored = STEP | {"step": "a", "spend": SPEND, "idle_check": MARKS[0]}
    read = PollProgress.model_validate(stored)
    assert read.progress() is None and read.rate == 12.5  # the rate is read on its own
    assert read.spend is not None and read.spend.dump() == SPEND
    assert read.idle_check is not None and read.idle_check.dump() == MARKS[0]
    no_time = PollProgress.model_validate(STEP | {"seen_at": "later"})
    assert no_time.progress() is None and "step" not in no_time.dump()


def test_odd_sections_read_as_missing_or_their_defaults() -> None:
    read = PollProgress.model_validate(
        STEP
        | {
            "rate": "fast",
            "spend": {"resource": 3, "price": [], "ready_seconds": "x", "seen_at": "?"},
            "idle_check": "x",
            "version": 1,
            "from_a_later_version": True,
        }
    )
    progress = read.progress()
    assert progress is not None and progress.step == 12345678901234567 and read.rate is None
    assert read.idle_check is None
    spend = read.spend
    assert spend is not None and spend.resource is None and spend.price is None
    assert spend.ready_seconds is None and spend.seen_at is None
    assert spend.model_resource() is None and spend.cost() is None
    bad = SpendRead.model_validate({"resource": {"status": "READY"}, "price": {"currency": 1}})
    assert bad.model_resource() is None  # no id: not a resource
    assert "from_a_later_version" not in read.dump() and "version" not in read.dump()
    assert PollProgress.model_validate({"version": 2} | STEP).dump() == {"version": 2} | STEP


def test_an_odd_card_view_in_an_old_payload_still_loads() -> None:
    for watch in ("x", {"target": True, "eta": "soon", "spend": "x"}):
        payload = RootPayload.model_validate({"old_status": "S", "new_status": "S", "watch": watch})
        assert payload.watch is not None and payload.watch.dump() == {}
    assert RootPayload.model_validate({"old_status": "S", "new_status": "S"}).watch is None
