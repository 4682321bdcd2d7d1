"""The routing rules without a process: `subscribe … broadcast=` and `dm=` as
the parser reads them, which thread replies each broadcast mode also shows in
the channel, which thread rows owe the creator a DM (and only one per event),
and the words a subscribe answer gives for them."""

from __future__ import annotations

from datetime import datetime

import pytest

from bot.commands.parser import Problem, parse
from bot.commands.routing import routing_words
from bot.delivery.routing import default_mode, reply_broadcast
from bot.outbox.contract.payloads import (
    CheckpointsPayload,
    CreatorDmPayload,
    IdlePayload,
    Kind,
    ProgressPayload,
    RepagePayload,
    RootPayload,
    TransitionPayload,
    read_payload,
)
from bot.outbox.contract.rows import (
    Thread,
    creator_dm_rows,
    idle_rows,
    progress_row,
    repage_row,
    status_row,
)
from bot.rendering.usage import BROADCAST_USAGE, DM_USAGE
from bot.simulated import make_session
from bot.simulated.together import KEY_OWNER, make_model_resource
from bot.training.sessions import TrainingSession
from bot.training.snapshots import trimmed_snapshot
from bot.training.transitions import detect

SID = "123e4567-e89b-12d3-a456-426614174000"
USERS = {KEY_OWNER: "UDANA"}
SINCE = datetime(2026, 12, 1, 10, 0)


def _thread(sub: int) -> Thread:
    return Thread(sub, SID, f"C{sub}", f"1700000000.{sub:06d}")


def _status_rows(new: str, *subs: int, told: bool = True) -> list:
    session = TrainingSession.model_validate(make_session(SID, new))
    change = detect("TRAINING_SESSION_STATUS_RUNNING", session)
    assert change is not None
    return [
        status_row(
            _thread(s), seq=3, transition=change, snapshot=trimmed_snapshot(session), told=told
        )
        for s in subs
    ]


# --- the grammar -----------------------------------------------------------------------------


def test_broadcast_and_dm_are_parsed_checked_and_kept_apart_from_filters() -> None:
    command = parse(f"subscribe {SID} checkpoints broadcast=ENDS dm=creator stall=30m")
    assert command.problem is None
    options = command.options
    assert (options.broadcast, options.dm, options.filters) == ("ends", "creator", {"checkpoints"})
    assert options.stall_after_minutes == 30
    plain = parse(f"subscribe {SID}").options
    assert (plain.broadcast, plain.dm) == (None, None)  # keeps the thread's choice
    assert parse(f"subscribe {SID} dm=off").options.dm == ""  # turns it off
    for bad, usage in [
        ("broadcast=sometimes", BROADCAST_USAGE),
        ("broadcast=all broadcast=off", BROADCAST_USAGE),
        ("broadcast=", BROADCAST_USAGE),
        ("dm=channel", DM_USAGE),
        ("dm=creator dm=creator", DM_USAGE),
    ]:
        refused = parse(f"subscribe {SID} {bad}")
        assert (refused.problem, refused.reason) == (Problem.USAGE, usage), bad


def test_the_answer_names_the_routing_and_warns_of_an_unmapped_creator() -> None:
    session = TrainingSession.model_validate(make_session(SID, "RUNNING"))
    words = routing_words(
        parse(f"subscribe {SID} broadcast=all dm=creator").options, session, USERS
    )
    assert "every thread reply also shown in the channel" in words
    assert "<@UDANA>" in words
    unmapped = routing_words(parse(f"subscribe {SID} dm=creator").options, session, {})
    assert f"`{KEY_OWNER}`" in unmapped and "your operator pairs the Together user" in unmapped
    assert "CREATED_BY_USER_MAP" not in unmapped
    assert "none until then" in unmapped
    assert routing_words(parse(f"subscribe {SID}").options, session, USERS) == ""


# --- broadcast -------------------------------------------------------------------------------


def test_each_broadcast_mode_shows_its_replies_in_the_channel() -> None:
    error = _status_rows("ERROR", 1)[0].payload
    stopped = _status_rows("STOPPED", 1)[0].payload
    creating = TransitionPayload(
        old_status="TRAINING_SESSION_STATUS_CREATING", new_status="TRAINING_SESSION_STATUS_RUNNING"
    )
    checkpoints = CheckpointsPayload(items=[])
    stall = ProgressPayload(event="stalled", since=SINCE)
    assert stopped.ended and not error.new_status.endswith("STOPPED")
    table = {
        "errors": [True, None, None, None, None],
        "ends": [True, True, None, None, None],
        "all": [True, True, True, True, True],
        "off": [None, None, None, None, None],
    }
    for mode, expected in table.items():
        got = [
            reply_broadcast(p, mode, in_thread=True)
            for p in (error, stopped, creating, checkpoints, stall)
        ]
        assert got == expected, mode
    # never outside a thread, never for a root-only row; a repage always
    assert reply_broadcast(error, "all", in_thread=False) is None
    assert (
        reply_broadcast(RootPayload(old_status="a", new_status="b"), "all", in_thread=True) is None
    )
    repage = RepagePayload(alert_id=1, minutes=5)
    assert reply_broadcast(repage, "off", in_thread=True) is True
    assert (default_mode(True), default_mode(False)) == ("errors", "off")


# --- the creator's DM -------------------------------------------------------------------------


def test_an_error_dms_the_mapped_creator_once_however_many_threads_chose_it() -> None:
    rows = _status_rows("ERROR", 1, 2, 3) + _status_rows("ERROR", 4, told=False)
    dms = creator_dm_rows(rows, {1, 2, 4}, USERS)
    assert len(dms) == 1
    dm = dms[0]
    assert (dm.channel_id, dm.subscription_id, dm.session_id) == ("UDANA", None, SID)
    assert dm.kind is Kind.CREATOR_DM and dm.dedupe_key.startswith("creator-dm:UDANA:")
    assert isinstance(dm.payload, CreatorDmPayload)
    assert isinstance(dm.payload.event, TransitionPayload)
    assert (dm.payload.thread_channel, dm.payload.thread_ts) == ("C1", _thread(1).thread_ts)
    # stored and read back through the contract, as delivery does
    again = read_payload(dm.kind, dm.values()["payload"])
    assert again == dm.payload
    # a filtered thread (root-only row) still DMs: the filter is the channel's
    assert creator_dm_rows(rows[3:], {4}, USERS)[0].dedupe_key == dm.dedupe_key


def test_no_dm_unasked_unmapped_or_for_news_that_is_not_trouble() -> None:
    errors = _status_rows("ERROR", 1)
    assert creator_dm_rows(errors, set(), USERS) == []  # nobody chose dm=creator
    assert creator_dm_rows(errors, {1}, {}) == []  # the creator has no Slack user
    assert creator_dm_rows(_status_rows("STOPPED", 1), {1}, USERS) == []
    resumed = ProgressPayload(event="resumed", since=SINCE, session=make_session(SID, "RUNNING"))
    assert creator_dm_rows([progress_row(_thread(1), resumed)], {1}, USERS) == []


def test_a_stall_and_an_idle_resource_dm_once_per_episode_but_never_the_page() -> None:
    session = make_session(SID, "RUNNING")
    stalled = ProgressPayload(event="stalled", since=SINCE, seconds=900, session=session)
    stall_rows = [progress_row(_thread(s), stalled) for s in (1, 2)]
    page = stalled.model_copy(update={"page": True})
    first = creator_dm_rows(stall_rows, {1, 2}, USERS)
    assert len(first) == 1 and first[0].dedupe_key.endswith(SINCE.isoformat())
    later = stalled.model_copy(update={"seconds": 1800})  # the next poll of the same stall
    assert creator_dm_rows([progress_row(_thread(1), later)], {1}, USERS)[0].dedupe_key == (
        first[0].dedupe_key
    )
    assert creator_dm_rows([progress_row(_thread(1), page)], {1}, USERS) == []
    idle = IdlePayload(resource=make_model_resource("res-1"), idle_since=SINCE)
    rows = idle_rows(idle, oncall_channel="COPS", threads=[_thread(1), _thread(2)])
    dms = creator_dm_rows(rows, {1, 2}, USERS)
    assert len(dms) == 1 and isinstance(dms[0].payload.event, IdlePayload)
    assert not dms[0].payload.event.page
    other = {"someone_else": "UOTHER"}
    assert creator_dm_rows(rows, {1, 2}, other) == []


def test_a_repage_is_one_row_per_alert_in_its_thread() -> None:
    row = repage_row("COPS", alert_id=42, thread_ts="1.5", minutes=10, what="x")
    assert (row.dedupe_key, row.thread_ts, row.kind) == ("repage:42", "1.5", Kind.REPAGE)


@pytest.mark.parametrize("mode", ["errors", "ends", "all", "off"])
def test_a_transition_without_a_thread_is_never_broadcast(mode: str) -> None:
    assert reply_broadcast(_status_rows("ERROR", 1)[0].payload, mode, in_thread=False) is None
