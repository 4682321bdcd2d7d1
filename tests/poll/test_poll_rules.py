"""What one poll result does to a session's watch (`judge.observe`), and what a
batch's results do (`judge.judge`), without a process or a database: the columns
written and the events numbered for telling."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.poll.audience import Subscriber, notifications
from bot.poll.judge import Judgement, judge, observe
from bot.poll.pace import MAX_POLL_BACKOFF_SECONDS
from bot.simulated import make_session
from bot.together.errors import TogetherError
from bot.training.sessions import RawSession, TrainingSession
from bot.training.snapshots import seen_state
from bot.training.status import short_status
from bot.training.transitions import GONE, checkpoint_keys

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
    assert values == seen_state(session) | {
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


# --- a batch judged whole (`judge.judge`) -----------------------------------------------


@dataclass
class StoredRow(Row):
    progress: dict[str, object] | None = None
    active: bool = True
    write_failures: int = 0
    last_failure: str | None = None
    fingerprint: str | None = None


def _judge(rows: dict[str, StoredRow], outcomes: dict, *, now: datetime = NOW) -> Judgement:
    return judge(
        rows,
        outcomes,
        now=now,
        next_poll=now + timedelta(seconds=60),
        confirm=CONFIRM,
        interval=60.0,
        stall_after=None,
    )


def test_a_row_seen_before_writes_only_what_moves_with_time() -> None:
    raw = RawSession.of(make_session(SID, step="42"))
    first = _judge({SID: StoredRow(checkpoint_keys=checkpoint_keys(raw.session()))}, {SID: raw})
    assert first.events == {}
    assert first.updates[SID]["fingerprint"] == raw.fingerprint
    assert first.updates[SID]["write_failures"] == 0

    later = NOW + timedelta(seconds=30)
    stored = StoredRow(
        checkpoint_keys=checkpoint_keys(raw.session()),
        progress=first.updates[SID]["progress"],
        fingerprint=raw.fingerprint,
    )
    again = _judge({SID: stored}, {SID: raw}, now=later)
    assert again.events == {}
    assert set(again.updates[SID]) == {"last_polled_at", "next_poll_at", "progress"}
    assert again.updates[SID]["last_polled_at"] == later


def test_an_ended_session_is_counted_by_its_new_status() -> None:
    before = _session("RUNNING")
    after = _session("STOPPED")
    judged = _judge({SID: StoredRow(checkpoint_keys=checkpoint_keys(before))}, {SID: after})
    assert judged.ended() == [SID]
    assert judged.to_status() == {short_status(after.status): 1}
    assert judged.updates[SID]["active"] is False


def test_a_session_not_among_the_rows_is_not_judged() -> None:
    """Its lease was lost: whoever holds it now writes it."""
    other = "223e4567-e89b-12d3-a456-426614174000"
    failed = TogetherError("unavailable", "HTTP 503")
    judged = _judge({SID: StoredRow()}, {SID: failed, other: failed})
    assert list(judged.updates) == [SID]
    assert judged.updates[SID]["consecutive_failures"] == 1
    assert judged.ended() == [] and judged.to_status() == {}


def test_a_card_value_that_comes_back_is_redrawn_again() -> None:
    """12 → 13 → 12 steps/min: three redraws, each its own outbox row (the third
    one was dropped as a repeat of the first, and the card kept showing 13)."""
    sub = Subscriber(1, SID, "C1", "1.000", frozenset({"status"}), target_step=10_000)
    stored = StoredRow()
    shown: list[str] = []
    keys: list[str] = []
    for minute, step in enumerate((0, 10, 22, 36, 47)):  # 12, then 13, then 12 a minute
        now = NOW + timedelta(minutes=minute)
        raw = RawSession.of(make_session(SID, step=str(step)))
        judged = _judge({SID: stored}, {SID: raw}, now=now)
        stored = StoredRow(
            checkpoint_keys=checkpoint_keys(raw.session()), progress=judged.updates[SID]["progress"]
        )
        owed = notifications(judged.events, [sub], now=now, oncall_channel=None)
        keys += [row.dedupe_key for row in owed.rows]
        shown += [str(e.card_progress.rate) for e in judged.events.get(SID, []) if e.card_progress]
    assert shown == ["12.0", "13.0", "12.0"]
    assert len(keys) == 3 and len(set(keys)) == 3, keys
