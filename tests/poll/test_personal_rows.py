"""The personal DMs a poll owes (App Home: "Tell me about my sessions"): pure
rows out of events and the people listening, and their outbox contract."""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.alerts.stall import ProgressCheck, StallSettings
from bot.outbox.contract.payloads import (
    DmPayload,
    Kind,
    ProgressPayload,
    TransitionPayload,
    read_payload,
)
from bot.poll.audience import SessionEvent
from bot.poll.personal import personal_rows
from bot.simulated import make_session
from bot.training.rules import Progress
from bot.training.sessions import TrainingSession
from bot.training.status import Status
from bot.training.transitions import detect, gone

SID = "123e4567-e89b-12d3-a456-426614174000"
NOW = datetime(2026, 12, 2, 12, 0, 0)
STALL = StallSettings(
    stall_after=timedelta(minutes=15),
    creating_after=timedelta(minutes=5),
    oncall_channel="COPS",
    page_on_stall=True,
)


def _event(old: str, new: str, seq: int = 3) -> SessionEvent:
    session = TrainingSession.model_validate(make_session(SID, new))
    transition = detect(f"TRAINING_SESSION_STATUS_{old}", session)
    assert transition is not None
    return SessionEvent(seq, session, transition=transition)


def test_errors_and_ends_are_told_to_each_listener_once_and_other_changes_not() -> None:
    events = {
        SID: [
            _event("CREATING", "RUNNING", 1),
            _event("RUNNING", "ERROR", 2),
        ]
    }
    rows = personal_rows(events, {SID: ["U1", "U2"]}, now=NOW, stall=STALL)
    assert [(r.channel_id, r.kind) for r in rows] == [("U1", Kind.DM), ("U2", Kind.DM)]
    payload = rows[0].payload
    assert isinstance(payload, DmPayload) and isinstance(payload.about, TransitionPayload)
    assert payload.about.new_status.endswith("ERROR") and payload.about.ended
    # written twice (a repeated cycle), the same key: told once
    again = personal_rows(events, {SID: ["U1", "U2"]}, now=NOW, stall=STALL)
    assert [r.dedupe_key for r in again] == [r.dedupe_key for r in rows]
    assert personal_rows(events, {}, now=NOW, stall=STALL) == []
    stopped = personal_rows({SID: [_event("RUNNING", "STOPPED")]}, {SID: ["U1"]}, now=NOW)
    assert len(stopped) == 1


def test_a_gone_session_is_told_from_its_stored_snapshot() -> None:
    event = SessionEvent(4, None, transition=gone("TRAINING_SESSION_STATUS_RUNNING"))
    stored = {SID: {"id": SID, "status": "TRAINING_SESSION_STATUS_RUNNING", "display_name": "x"}}
    [row] = personal_rows({SID: [event]}, {SID: ["U1"]}, now=NOW, stored_snapshots=stored)
    assert isinstance(row.payload, DmPayload)
    told = row.payload.about.session  # type: ignore[union-attr]
    assert told is not None and (told.id, told.display_name) == (SID, "x")


def test_a_stall_is_told_once_per_episode_and_never_pages_from_a_dm() -> None:
    session = TrainingSession.model_validate(make_session(SID, "RUNNING"))
    since = NOW - timedelta(minutes=20)
    check = ProgressCheck(
        progress=Progress(step=5, since=since, running=True),
        change=None,
        prev_seen_at=NOW - timedelta(minutes=1),
        status=Status.RUNNING,
        created_at=since,
    )
    event = SessionEvent(5, session, progress=check)
    [row] = personal_rows({SID: [event]}, {SID: ["U1"]}, now=NOW, stall=STALL)
    assert isinstance(row.payload, DmPayload)
    about = row.payload.about
    assert isinstance(about, ProgressPayload) and about.event == "stalled" and not about.page
    later = personal_rows(
        {SID: [event]}, {SID: ["U1"]}, now=NOW + timedelta(minutes=5), stall=STALL
    )
    assert [r.dedupe_key for r in later] == [row.dedupe_key]
    fresh = ProgressCheck(
        progress=Progress(step=5, since=NOW - timedelta(minutes=2), running=True),
        change=None,
        prev_seen_at=None,
        status=Status.RUNNING,
        created_at=since,
    )
    quiet = SessionEvent(5, session, progress=fresh)
    assert personal_rows({SID: [quiet]}, {SID: ["U1"]}, now=NOW, stall=STALL) == []
    assert personal_rows({SID: [event]}, {SID: ["U1"]}, now=NOW, stall=None) == []


def test_a_dm_row_reads_back_as_its_payload() -> None:
    [row] = personal_rows({SID: [_event("RUNNING", "ERROR")]}, {SID: ["U1"]}, now=NOW)
    stored = row.values()["payload"]
    assert "kind" not in stored  # the row's column holds it
    back = read_payload(Kind.DM, stored)
    assert back == row.payload
