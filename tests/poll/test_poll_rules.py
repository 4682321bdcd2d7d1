"""What one poll result does to a session's watch (`poller.observe`), without a
process or a database: the columns written and the events numbered for telling."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.poll.cycle import MAX_POLL_BACKOFF_SECONDS, observe
from bot.together.client import TogetherError
from bot.training.shapes import TrainingSession
from bot.training.snapshots import watch_state
from bot.training.transitions import GONE, checkpoint_keys
from tests.fakes import make_session

SID = "123e4567-e89b-12d3-a456-426614174000"
NOW = datetime(2026, 12, 1, 12, 0, 0)
NEXT = NOW + timedelta(seconds=60)
CONFIRM = timedelta(seconds=180)


@dataclass
class Row:
    last_status: str = "TRAINING_SESSION_STATUS_RUNNING"
    transition_seq: int = 4
    consecutive_failures: int = 0
    checkpoint_keys: list[str] | None = None
    not_found_since: datetime | None = None


def _observe(row: Row, fetched: TrainingSession | TogetherError) -> tuple[dict, list]:
    return observe(row, fetched, now=NOW, next_poll=NEXT, confirm=CONFIRM, interval=60.0)


def _session(status: str, checkpoints: int = 1) -> TrainingSession:
    return TrainingSession.model_validate(make_session(SID, status, checkpoints=checkpoints))


def test_an_unchanged_session_is_stored_whole_and_tells_nothing() -> None:
    session = _session("RUNNING")
    values, events = _observe(Row(checkpoint_keys=checkpoint_keys(session)), session)
    assert events == []
    assert values == watch_state(session) | {
        "transition_seq": 4,
        "consecutive_failures": 0,
        "not_found_since": None,
        "last_failure": None,
        "next_poll_at": NEXT,
        "active": True,
    }


def test_new_checkpoints_then_a_status_change_are_numbered_in_that_order() -> None:
    before = _session("RUNNING", checkpoints=1)
    after = _session("STOPPED", checkpoints=2)
    values, events = _observe(Row(checkpoint_keys=checkpoint_keys(before)), after)
    assert [e.seq for e in events] == [5, 6]
    assert events[0].checkpoints and events[0].transition is None
    assert events[1].transition is not None and events[1].transition.ended
    assert values["transition_seq"] == 6 and values["active"] is False


def test_a_first_json_404_only_starts_confirming_and_a_lasting_one_is_gone() -> None:
    missing = TogetherError("not_found", status=404)
    values, events = _observe(Row(), missing)
    assert events == []
    assert values["not_found_since"] == NOW and values["consecutive_failures"] == 1
    assert values["next_poll_at"] == NEXT

    values, events = _observe(Row(not_found_since=NOW - CONFIRM), missing)
    [event] = events
    assert event.seq == 5 and event.session is None
    assert event.transition is not None and event.transition.new_status == GONE
    assert values["active"] is False and values["last_failure"] == "gone (404)"


def test_other_failures_back_off_exponentially_up_to_the_cap_or_as_told() -> None:
    down = TogetherError("unavailable", "HTTP 503")
    values, events = _observe(Row(consecutive_failures=1), down)
    assert events == []
    assert values["next_poll_at"] == NOW + timedelta(seconds=240)  # 60 s x 2^2
    assert values["consecutive_failures"] == 2 and values["not_found_since"] is None
    values, _ = _observe(Row(consecutive_failures=9), down)
    assert values["next_poll_at"] == NOW + timedelta(seconds=MAX_POLL_BACKOFF_SECONDS)
    limited = TogetherError("rate_limited", retry_after=7.0)
    values, _ = _observe(Row(), limited)
    assert values["next_poll_at"] == NOW + timedelta(seconds=7)


def test_a_request_held_back_by_a_shared_pause_is_asked_again_and_not_counted() -> None:
    """Another session's 429 paused every request; this one never left the bot."""
    held = TogetherError("rate_limited", "pausing after a 429", retry_after=4.0, sent=False)
    values, events = _observe(Row(consecutive_failures=0, not_found_since=NOW), held)
    assert events == []
    assert values == {"next_poll_at": NOW + timedelta(seconds=4)}  # nothing else changes
