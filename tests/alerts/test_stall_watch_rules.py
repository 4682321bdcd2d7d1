"""The stall watch between a poll and the outbox (bot/stall_watch.py): which
rows a check owes each subscription. Pure: no process, no database."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.alerts.stall import StallSettings, check, rows, threshold
from bot.outbox.contract.payloads import ProgressPayload
from bot.outbox.contract.rows import Thread
from bot.simulated import make_session
from bot.simulated.together import make_model_resource
from bot.training.poll_progress import PollProgress
from bot.training.sessions import TrainingSession

SID = "123e4567-e89b-12d3-a456-426614174000"
T0 = datetime(2026, 12, 1, 10, 0)  # the database's naive UTC
MIN = timedelta(minutes=1)
SETTINGS = StallSettings(
    stall_after=15 * MIN, creating_after=30 * MIN, oncall_channel="COPS", page_on_stall=True
)


def session(status: str = "RUNNING", step: int = 7, **over: object) -> TrainingSession:
    return TrainingSession.model_validate(make_session(SID, status, step=str(step), **over))


def threads(*minutes: int | None, muted: bool = False) -> list[tuple[Thread, int | None, bool]]:
    return [(Thread(i + 1, SID, f"C{i}", f"{i}.0"), m, muted) for i, m in enumerate(minutes)]


def poll(stored: object, s: TrainingSession, at: timedelta) -> tuple[dict, object]:
    new, progress = check(PollProgress.model_validate(stored), s, now=T0 + at)
    return new.dump(), progress


def owed(stored: object, s: TrainingSession, at: timedelta, subs: list) -> tuple[dict, list]:
    stored, progress = poll(stored, s, at)
    if progress is None:
        return stored, []
    return stored, rows(progress, s, subs, now=T0 + at, settings=SETTINGS)


def kinds(found: list) -> list[tuple[str, str]]:
    return [
        (r.payload.event, r.channel_id) for r in found if isinstance(r.payload, ProgressPayload)
    ]


def test_each_thread_at_its_own_threshold_and_on_call_once_per_episode() -> None:
    subs = threads(None, 30, 0)
    stored: object = None
    seen: list[tuple[str, str]] = []
    keys: set[str] = set()
    for minute in range(0, 40):
        stored, found = owed(stored, session(), minute * MIN, subs)
        seen += [k for k in kinds(found) if k not in seen]
        keys |= {r.dedupe_key for r in found}
    assert seen == [("stalled", "C0"), ("stalled", "COPS"), ("stalled", "C1")]
    # Every poll past a threshold writes the same key again: the outbox keeps one.
    assert len(keys) == 3
    assert {k.split(":")[0] for k in keys} == {"stalled", "stall-page"}


def test_resumed_only_after_a_stall_an_earlier_poll_saw() -> None:
    subs = threads(None)
    stored, _ = owed(None, session(step=7), 0 * MIN, subs)
    stored, found = owed(stored, session(step=7), 15 * MIN, subs)
    assert kinds(found) == [("stalled", "C0"), ("stalled", "COPS")]
    stored, found = owed(stored, session(step=9), 16 * MIN, subs)
    assert kinds(found) == [("resumed", "C0")]
    [row] = found
    assert isinstance(row.payload, ProgressPayload)
    assert (row.payload.step, row.payload.new_step) == (7, 9)
    # A step that moves just as the threshold passes was never told stalled: no resumed.
    stored, _ = owed(None, session(step=7), 0 * MIN, subs)
    stored, _ = owed(stored, session(step=7), 14 * MIN, subs)
    stored, found = owed(stored, session(step=8), 16 * MIN, subs)
    assert kinds(found) == []


def test_muted_threads_hear_nothing_and_all_off_pages_nobody() -> None:
    stored, _ = owed(None, session(), 0 * MIN, threads(None, muted=True))
    stored, found = owed(stored, session(), 20 * MIN, threads(None, muted=True))
    assert kinds(found) == [("stalled", "COPS")]
    stored, _ = owed(None, session(), 0 * MIN, threads(0, 0))
    stored, found = owed(stored, session(), 20 * MIN, threads(0, 0))
    assert found == []


def test_a_slow_start_is_told_from_togethers_created_at() -> None:
    created = datetime(2026, 12, 1, 9, 50, tzinfo=UTC)
    creating = session("CREATING", step=0, created_at=created.isoformat())
    stored, found = owed(None, creating, 0 * MIN, threads(None))
    assert found == []  # ten minutes in
    stored, found = owed(stored, creating, 20 * MIN, threads(None))
    assert kinds(found) == [("creating", "C0")]
    assert found[0].dedupe_key == f"creating:1:{created.replace(tzinfo=None).isoformat()}"


def test_the_progress_column_round_trips_and_odd_values_are_a_first_look() -> None:
    stored, _ = poll(None, session(step=12345678901234567), 0 * MIN)
    assert stored["step"] == "12345678901234567"
    read = PollProgress.model_validate(stored)
    progress, seen_at = read.progress(), read.seen_at
    assert progress is not None and progress.step == 12345678901234567 and seen_at == T0
    for odd in (None, "x", {}, {"since": "yesterday", "seen_at": "now"}, {"step": "a"}):
        assert PollProgress.model_validate(odd).progress() is None


def test_polls_that_cannot_owe_a_row_give_no_check() -> None:
    """A step that stood still for less than any threshold (none is shorter than
    the default or a minute) owes no row in any thread: no check, so the poller
    reads no subscriptions for it. Over random histories, what is owed is the
    same as with a check on every poll."""
    rng = random.Random(13)
    subs = threads(None, 1, 30, 0) + threads(2, muted=True)
    for default in (15 * MIN, timedelta(seconds=3), None):
        settings = StallSettings(
            stall_after=default, creating_after=30 * MIN, oncall_channel="COPS", page_on_stall=True
        )
        for _ in range(40):
            narrowed = every = PollProgress.model_validate(None)
            at, step, status = timedelta(0), 7, "RUNNING"
            skipped = 0
            for _ in range(30):
                at += timedelta(seconds=rng.choice([1, 5, 10, 30, 59, 60, 61, 300, 900]))
                if rng.random() < 0.3:
                    step += 1
                if rng.random() < 0.1:
                    status = rng.choice(["RUNNING", "CREATING", "STOPPING"])
                s = session(status, step=step)
                narrowed, mine = check(narrowed, s, now=T0 + at, stall_after=default)
                every, all_ = check(every, s, now=T0 + at, stall_after=timedelta.resolution)
                assert narrowed == every
                assert all_ is not None or mine is None
                if mine is None:
                    skipped += 1
                    theirs = rows(all_, s, subs, now=T0 + at, settings=settings) if all_ else []
                    assert theirs == []
                else:
                    assert rows(mine, s, subs, now=T0 + at, settings=settings) == rows(
                        all_, s, subs, now=T0 + at, settings=settings
                    )
            assert skipped  # the narrowing did narrow


def test_threshold() -> None:
    assert threshold(None, 15 * MIN) == 15 * MIN
    assert threshold(0, 15 * MIN) is None
    assert threshold(45, None) == 45 * MIN


def _stalled(spend: dict[str, Any] | None) -> ProgressPayload:
    """The stalled payload the first thread gets once the step froze 20 minutes,
    with `spend` as the spend watch's last read of the resource."""
    stored, _ = owed(None, session(), 0 * MIN, threads(None))
    if spend is not None:
        stored = stored | {"spend": spend}
    _, found = owed(stored, session(), 20 * MIN, threads(None))
    payload = next(r.payload for r in found if r.channel_id == "C0")
    assert isinstance(payload, ProgressPayload) and payload.event == "stalled"
    return payload


def test_the_stall_says_the_resources_expires_at_when_the_spend_watch_read_it() -> None:
    expires = "2026-12-01T10:50:00Z"
    resource = make_model_resource("r1", "READY", expires_at=expires, inactive_timeout=1800)
    known = _stalled({"status": "READY", "resource": resource})
    assert known.idles_out_at == datetime(2026, 12, 1, 10, 50)  # naive UTC, as stored
    assert known.idles_out_estimated is False
    # Not READY (no expires_at to trust): the estimate, with the resource's own timeout.
    guessed = _stalled({"status": "PENDING", "resource": resource})
    assert guessed.idles_out_at == T0 + 30 * MIN and guessed.idles_out_estimated
    # No read at all: the estimate with Together's default hour.
    default = _stalled(None)
    assert default.idles_out_at == T0 + 60 * MIN and default.idles_out_estimated
    # An unreadable read is no read.
    assert _stalled({"status": "READY", "resource": {"expires_at": "soon"}}).idles_out_estimated
