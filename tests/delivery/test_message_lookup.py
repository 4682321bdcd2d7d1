"""What a row's message asks Slack and Together for before it is drawn: which
threads it links (`_linked_threads`) and which resource a slow start shows."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.delivery.messages import _linked_threads, _slow_start_resource
from bot.outbox.contract.payloads import CreatorDmPayload, OncallPayload, ProgressPayload
from bot.outbox.table import OutboxMessage
from bot.simulated import make_session
from bot.training.snapshots import SessionSnapshot

SID = "123e4567-e89b-12d3-a456-426614174000"
SINCE = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
THREAD = ("C1", "1700000000.000001")


def _session(**over: object) -> SessionSnapshot:
    return SessionSnapshot.model_validate(make_session(SID, "CREATING", **over))


def test_an_on_call_page_links_its_thread_and_a_paged_stall_only_when_paged() -> None:
    assert _linked_threads(OncallPayload(thread_channel="C1", thread_ts=THREAD[1])) == [THREAD]
    assert _linked_threads(OncallPayload()) == []
    stall = {"event": "stalled", "since": SINCE, "thread_channel": "C1", "thread_ts": THREAD[1]}
    assert _linked_threads(ProgressPayload(**stall, page=True)) == [THREAD]
    assert _linked_threads(ProgressPayload(**stall, page=False)) == []
    # a slow start or a resumed stall links nothing, paged or not
    assert _linked_threads(ProgressPayload(**(stall | {"event": "creating"}), page=True)) == []


def test_a_creators_dm_links_its_thread_after_what_its_event_links() -> None:
    event = ProgressPayload(
        event="stalled", since=SINCE, page=True, thread_channel="C2", thread_ts="2.0"
    )
    dm = CreatorDmPayload(event=event, thread_channel="C1", thread_ts=THREAD[1])
    assert _linked_threads(dm) == [("C2", "2.0"), THREAD]


def test_only_a_slow_start_with_a_resource_asks_together() -> None:
    row = OutboxMessage(session_id=SID)
    creating = ProgressPayload(
        event="creating", since=SINCE, session=_session(model_resources_id="res-1")
    )
    assert _slow_start_resource(creating, row) == "res-1"
    assert _slow_start_resource(CreatorDmPayload(event=creating), row) == "res-1"
    stalled = creating.model_copy(update={"event": "stalled"})
    assert _slow_start_resource(stalled, row) is None
    no_resource = ProgressPayload(
        event="creating", since=SINCE, session=_session(model_resources_id=None)
    )
    assert _slow_start_resource(no_resource, row) is None
