"""The notify rules without a process or a database: which outbox rows a poll's
events owe each subscription (filters, mute, root-only rows, checkpoints) and
on-call, and the typed outbox contract those rows follow."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.outbox.contract.payloads import (
    CardPayload,
    CheckpointsPayload,
    DigestPayload,
    Kind,
    OncallPayload,
    OperatorPayload,
    RenderedDigest,
    RootPayload,
    TransitionPayload,
    read_payload,
)
from bot.outbox.contract.rows import oncall_key, operator_row
from bot.poll.audience import SessionEvent, Subscriber, notifications, tells
from bot.simulated import make_session
from bot.training.poll_progress import PollProgress
from bot.training.sessions import TrainingSession
from bot.training.transitions import CheckpointNews, detect, gone

SID = "123e4567-e89b-12d3-a456-426614174000"
SID2 = "223e4567-e89b-12d3-a456-426614174000"
NOW = datetime(2026, 12, 1, 12, 0, 0)
OPS = "COPS"


def _session(status: str, sid: str = SID) -> TrainingSession:
    """A session as Together sends it, at a fixed time: two built for one test are alike
    (a dedupe key holds the session's update time)."""
    return TrainingSession.model_validate(make_session(sid, status, now=NOW.replace(tzinfo=UTC)))


def _watcher(
    id: int, filters: str = "status", *, muted_until: datetime | None = None, sid: str = SID
) -> Subscriber:
    return Subscriber(
        id=id,
        session_id=sid,
        channel_id=f"C{id}",
        root_ts=f"1700000000.{id:06d}",
        filters=frozenset(filters.split(",")),
        muted_until=muted_until,
    )


def _change(old: str, new: str, seq: int = 1, sid: str = SID) -> dict[str, list[SessionEvent]]:
    session = _session(new, sid)
    transition = detect(f"TRAINING_SESSION_STATUS_{old}", session)
    assert transition is not None
    return {sid: [SessionEvent(seq, session, transition=transition)]}


def test_status_filter_tells_every_change_errors_only_only_errors() -> None:
    stopping = detect("TRAINING_SESSION_STATUS_RUNNING", _session("STOPPING"))
    error = detect("TRAINING_SESSION_STATUS_RUNNING", _session("ERROR"))
    assert stopping is not None and error is not None
    assert tells(frozenset({"status"}), stopping)
    assert not tells(frozenset({"errors-only"}), stopping)
    assert tells(frozenset({"errors-only"}), error)
    assert not tells(frozenset({"checkpoints"}), error)


def test_each_subscription_gets_one_row_told_or_root_only_by_filter_and_mute() -> None:
    watchers = [
        _watcher(1),
        _watcher(2, "errors-only"),
        _watcher(3, muted_until=NOW + timedelta(minutes=5)),
        _watcher(4, muted_until=NOW - timedelta(minutes=5)),  # mute ran out: told
    ]
    out = notifications(
        _change("RUNNING", "STOPPING", seq=7), watchers, now=NOW, oncall_channel=OPS
    )
    assert [(r.subscription_id, r.kind) for r in out.rows] == [
        (1, Kind.TRANSITION),
        (2, Kind.ROOT),
        (3, Kind.ROOT),
        (4, Kind.TRANSITION),
    ]
    assert [r.dedupe_key for r in out.rows] == [f"transition:{i}:7" for i in (1, 2, 3, 4)]
    first = out.rows[0]
    assert isinstance(first.payload, TransitionPayload)
    assert first.payload.new_status == "TRAINING_SESSION_STATUS_STOPPING"
    assert not first.payload.ended
    assert first.channel_id == "C1" and first.thread_ts == "1700000000.000001"
    assert isinstance(out.rows[1].payload, RootPayload)
    assert out.alerts == []  # not an error


def test_an_error_pages_on_call_once_linking_the_first_thread_even_when_muted() -> None:
    watchers = [_watcher(5, muted_until=NOW + timedelta(hours=1)), _watcher(6)]
    out = notifications(_change("RUNNING", "ERROR", seq=3), watchers, now=NOW, oncall_channel=OPS)
    assert [r.kind for r in out.rows] == [Kind.ROOT, Kind.TRANSITION]
    [alert] = out.alerts
    assert alert.kind is Kind.ONCALL and alert.channel_id == OPS
    assert isinstance(alert.payload, OncallPayload)
    assert (alert.payload.thread_channel, alert.payload.thread_ts) == ("C5", "1700000000.000005")
    assert alert.dedupe_key == oncall_key(_session("ERROR"), 3)
    assert alert.subscription_id is None and alert.thread_ts is None


def test_no_on_call_channel_no_alert_and_an_unwatched_error_alerts_without_a_thread() -> None:
    assert (
        notifications(
            _change("RUNNING", "ERROR"), [_watcher(1)], now=NOW, oncall_channel=None
        ).alerts
        == []
    )
    out = notifications(_change("RUNNING", "ERROR"), [], now=NOW, oncall_channel=OPS)
    assert out.rows == []
    [alert] = out.alerts
    assert isinstance(alert.payload, OncallPayload) and alert.payload.thread_ts is None


def test_checkpoints_are_told_only_to_unmuted_checkpoint_subscriptions() -> None:
    session = _session("RUNNING")
    items = [CheckpointNews(kind="training", id="ck-1", step=10, event="new")]
    events = {SID: [SessionEvent(2, session, checkpoints=items)]}
    watchers = [
        _watcher(1),
        _watcher(2, "status,checkpoints"),
        _watcher(3, "checkpoints", muted_until=NOW + timedelta(minutes=1)),
    ]
    out = notifications(events, watchers, now=NOW, oncall_channel=OPS)
    [row] = out.rows
    assert row.subscription_id == 2 and row.kind is Kind.CHECKPOINTS
    assert row.dedupe_key == "checkpoints:2:2"
    assert isinstance(row.payload, CheckpointsPayload) and row.payload.items == items


def test_a_gone_session_is_told_from_its_stored_snapshot_and_pages_no_one() -> None:
    stored = {SID: {"id": SID, "status": "TRAINING_SESSION_STATUS_RUNNING"}}
    events = {SID: [SessionEvent(4, None, transition=gone("TRAINING_SESSION_STATUS_RUNNING"))]}
    out = notifications(events, [_watcher(1)], now=NOW, oncall_channel=OPS, stored_snapshots=stored)
    [row] = out.rows
    assert isinstance(row.payload, TransitionPayload)
    assert row.payload.gone and row.payload.ended
    assert row.payload.session is not None
    assert (row.payload.session.id, row.payload.session.status) == (SID, stored[SID]["status"])
    assert out.alerts == []


def test_only_the_events_sessions_subscriptions_hear_them() -> None:
    watchers = [_watcher(1), _watcher(2, sid=SID2)]
    out = notifications(_change("RUNNING", "STOPPED"), watchers, now=NOW, oncall_channel=None)
    assert [r.subscription_id for r in out.rows] == [1]
    assert isinstance(out.rows[0].payload, TransitionPayload) and out.rows[0].payload.ended


def test_stored_rows_read_back_as_their_payload_class() -> None:
    """What is stored is the payload without its kind (the column holds it), as
    before the contract existed: old rows still load."""
    out = notifications(_change("RUNNING", "ERROR"), [_watcher(1)], now=NOW, oncall_channel=OPS)
    for row in out.rows + out.alerts:
        values = row.values()
        assert "kind" not in values["payload"]
        assert read_payload(values["kind"], values["payload"]) == row.payload
    old_digest = read_payload("digest", {"message": {"text": "t", "blocks": []}})
    assert isinstance(old_digest, DigestPayload) and old_digest.message == RenderedDigest(text="t")
    old_transition = read_payload(
        "transition",
        {"old_status": "A", "new_status": "B", "ended": False, "gone": False, "session": None},
    )
    assert isinstance(old_transition, TransitionPayload) and old_transition.session is None
    op = operator_row(OPS, "together_auth:1:open", "Title", "Detail")
    assert op.dedupe_key == "operator:together_auth:1:open" and op.kind is Kind.OPERATOR
    assert isinstance(read_payload("operator", op.values()["payload"]), OperatorPayload)


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError):
        read_payload("carrier-pigeon", {})


def test_a_spend_watch_redraw_is_a_card_row_per_subscription_keyed_by_what_it_shows() -> None:
    session = _session("RUNNING")
    progress = PollProgress.model_validate({"rate": 2.0, "spend": {"status": "READY"}})
    events = {SID: [SessionEvent(3, session, card_progress=progress, card_view_key="abc")]}
    rows = notifications(
        events, [_watcher(1), _watcher(2, "errors-only")], now=NOW, oncall_channel=OPS
    )
    keys = [r.dedupe_key for r in rows.rows]
    assert [k.rsplit(":", 1)[0] for k in keys] == ["watch:1:abc", "watch:2:abc"]
    assert len(set(keys)) == 2  # each change its own row (a card may come back to it)
    assert rows.alerts == []
    for row in rows.rows:
        payload = row.payload
        assert isinstance(payload, CardPayload) and payload.watch is not None
        assert row.kind is Kind.CARD  # routine: paced, and merged with the card's others
        assert payload.watch.dump() == progress.dump()
        assert payload.session is not None and payload.session.status == session.status


def test_a_target_gives_its_thread_an_eta_redraw_even_without_the_spend_watch() -> None:
    session = _session("RUNNING")
    since = NOW - timedelta(minutes=1)
    watch = {"step": "1000", "since": since.isoformat(), "running": True, "rate": 100.0}
    watch |= {"anchored": True, "seen_at": NOW.isoformat()}
    events = {
        SID: [
            SessionEvent(
                3, session, card_progress=PollProgress.model_validate(watch), card_view_key="k"
            )
        ]
    }
    target = _watcher(2)._replace(target_step=2000)
    rows = notifications(events, [_watcher(1), target], now=NOW, oncall_channel=OPS).rows
    [row] = rows  # no spend and no target: no redraw for subscription 1
    assert row.dedupe_key.rsplit(":", 1)[0] == "watch:2:k:t2000"
    assert isinstance(row.payload, CardPayload) and row.payload.watch is not None
    assert row.payload.watch.dump()["target"] == 2000
    assert row.payload.watch.dump()["eta"] == (NOW + timedelta(minutes=10)).isoformat()
