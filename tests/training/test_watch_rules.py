"""Stall, slow-start, idle-resource and spend rules (bot/watch_rules.py): direct,
fast unit tests, no process and no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.training.rules import (
    CREATING_ALERT_AFTER,
    IDLE_RESOURCE_ALERT_AFTER,
    MAX_OBSERVED_GAP,
    STALL_AFTER,
    Progress,
    ResourceSeen,
    StallEvent,
    StallNotice,
    creating_episode,
    creating_overdue,
    estimated_spend,
    eta,
    idles_out_at,
    observe_progress,
    observe_resource,
    stall_rule,
    stalled_for,
)
from bot.training.status import ResourceStatus, Status
from tests.support import examples

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


class Session:
    """Drives the rules the way the poller does: one call per poll."""

    def __init__(self, *watches: StallNotice) -> None:
        self.progress: Progress | None = None
        self.watches = list(watches) or [StallNotice()]
        self.events: list[list[StallEvent]] = [[] for _ in self.watches]

    def poll(self, at: timedelta, step: int | None, status: Status = Status.RUNNING) -> None:
        now = T0 + at
        self.progress, change = observe_progress(self.progress, status=status, step=step, now=now)
        for i, watch in enumerate(self.watches):
            self.watches[i], event = stall_rule(watch, self.progress, change, now)
            if event is not None:
                self.events[i].append(event)

    def kinds(self, i: int = 0) -> list[str]:
        return [e.kind for e in self.events[i]]


def test_a_frozen_step_is_told_once_after_the_threshold_and_resumed_once() -> None:
    s = Session()
    for minute in range(0, 15):
        s.poll(minute * MIN, 1234)
    assert s.kinds() == []  # 14 minutes without progress: not yet
    for minute in range(15, 40):
        s.poll(minute * MIN, 1234)
    assert s.kinds() == ["stalled"]  # one message, never a stream
    stalled = s.events[0][0]
    assert stalled.step == 1234 and stalled.since == T0
    s.poll(40 * MIN, 1240)
    s.poll(41 * MIN, 1250)
    assert s.kinds() == ["stalled", "resumed"]
    resumed = s.events[0][1]
    assert (resumed.step, resumed.new_step, resumed.since) == (1234, 1240, T0)
    assert stalled.episode != resumed.episode


def test_each_stall_episode_is_its_own_event() -> None:
    s = Session()
    for minute in range(0, 20):
        s.poll(minute * MIN, 10)
    s.poll(20 * MIN, 11)
    for minute in range(21, 40):
        s.poll(minute * MIN, 11)
    assert s.kinds() == ["stalled", "resumed", "stalled"]
    first, second = s.events[0][0], s.events[0][2]
    assert first.episode != second.episode and second.since == T0 + 20 * MIN


def test_per_subscription_threshold_and_off() -> None:
    s = Session(StallNotice(), StallNotice(timedelta(minutes=30)), StallNotice(None))
    for minute in range(0, 29):
        s.poll(minute * MIN, 5)
    assert [s.kinds(i) for i in range(3)] == [["stalled"], [], []]
    for minute in range(29, 60):
        s.poll(minute * MIN, 5)
    assert [s.kinds(i) for i in range(3)] == [["stalled"], ["stalled"], []]
    s.poll(60 * MIN, 6)
    assert [s.kinds(i) for i in range(3)] == [["stalled", "resumed"], ["stalled", "resumed"], []]


def test_time_creating_never_counts_as_no_progress() -> None:
    s = Session()
    for minute in range(0, 40):
        s.poll(minute * MIN, 0, Status.CREATING)
    s.poll(40 * MIN, 0)
    for minute in range(41, 55):
        s.poll(minute * MIN, 0)
    assert s.kinds() == []
    s.poll(55 * MIN, 0)
    assert s.kinds() == ["stalled"] and s.events[0][0].since == T0 + 40 * MIN


def test_a_session_that_stops_ends_the_stall_without_a_resumed_message() -> None:
    s = Session()
    for minute in range(0, 20):
        s.poll(minute * MIN, 7)
    s.poll(20 * MIN, 7, Status.STOPPED)
    s.poll(21 * MIN, 9, Status.STOPPED)
    assert s.kinds() == ["stalled"]
    assert s.watches[0].told_since is None


def test_an_answer_without_a_step_is_no_evidence() -> None:
    s = Session()
    for minute in range(0, 20):
        s.poll(minute * MIN, None)
    assert s.kinds() == []  # no step at all: never "stalled"
    s = Session()
    for minute in range(0, 20):
        s.poll(minute * MIN, 3 if minute % 2 else None)
    s.poll(20 * MIN, None)
    assert s.kinds() == ["stalled"]  # a missing step neither resumes nor restarts the clock


def test_replaying_a_poll_from_the_same_state_gives_the_same_episode() -> None:
    """Two replicas (or a restart) computing from the stored state agree on the key."""
    progress = Progress(step=3, since=T0, running=True, anchored=True)
    now = T0 + 16 * MIN
    events = []
    for _ in range(2):
        p, change = observe_progress(progress, status=Status.RUNNING, step=3, now=now)
        _, event = stall_rule(StallNotice(), p, change, now)
        events.append(event)
    assert events[0] is not None and events[0] == events[1]
    assert events[0].episode == f"stalled:{T0.isoformat()}"


def test_steps_per_minute_from_the_bots_own_polls() -> None:
    progress, _ = observe_progress(None, status=Status.RUNNING, step=100, now=T0)
    # The first change is measured from the first look only if that was a change.
    progress, _ = observe_progress(progress, status=Status.RUNNING, step=101, now=T0 + MIN)
    assert progress.rate is None
    for i in range(2, 8):  # one step every two minutes
        progress, _ = observe_progress(
            progress, status=Status.RUNNING, step=100 + i, now=T0 + MIN + 2 * (i - 1) * MIN
        )
    assert progress.rate == pytest.approx(0.5)
    progress, _ = observe_progress(progress, status=Status.RUNNING, step=3, now=T0 + 30 * MIN)
    assert progress.rate is None  # restarted from a checkpoint: measure again


def test_rate_after_creating_is_measured_from_the_start_of_running() -> None:
    progress, _ = observe_progress(None, status=Status.CREATING, step=0, now=T0)
    progress, _ = observe_progress(progress, status=Status.RUNNING, step=0, now=T0 + 10 * MIN)
    progress, _ = observe_progress(progress, status=Status.RUNNING, step=30, now=T0 + 20 * MIN)
    assert progress.rate == pytest.approx(3.0)


def test_eta() -> None:
    p = Progress(step=1000, since=T0, running=True, rate=10.0, anchored=True)
    assert eta(p, 2000, T0) == T0 + timedelta(minutes=100)
    assert eta(p, 900, T0) == T0
    assert eta(p, None, T0) is None
    assert eta(Progress(1000, T0, True), 2000, T0) is None  # no rate yet
    assert eta(Progress(1000, T0, False, 10.0), 2000, T0) is None  # not running
    assert eta(Progress(1000, T0, True, 1e-9), 2000, T0) is None  # years away


def test_stalled_for_and_idle_out_time() -> None:
    p = Progress(step=5, since=T0, running=True)
    assert stalled_for(p, T0 + 5 * MIN) == 5 * MIN
    assert stalled_for(Progress(5, T0, False), T0 + 5 * MIN) is None
    expires = T0 + timedelta(minutes=47)
    assert idles_out_at(p, expires_at=expires, inactive_timeout=3600) == expires
    assert idles_out_at(p, expires_at=None, inactive_timeout=1800) == T0 + 30 * MIN
    assert idles_out_at(p, expires_at=None, inactive_timeout=None) == T0 + 60 * MIN


def test_creating_too_long() -> None:
    created = T0
    kw = {"created_at": created, "first_seen": T0 + 20 * MIN}
    assert not creating_overdue(status=Status.CREATING, now=T0 + 29 * MIN, **kw)  # type: ignore[arg-type]
    assert creating_overdue(status=Status.CREATING, now=T0 + CREATING_ALERT_AFTER, **kw)  # type: ignore[arg-type]
    assert not creating_overdue(status=Status.RUNNING, now=T0 + 90 * MIN, **kw)  # type: ignore[arg-type]
    # Without Together's created_at, from the bot's first look.
    assert not creating_overdue(
        status=Status.CREATING, created_at=None, first_seen=T0 + 20 * MIN, now=T0 + 45 * MIN
    )
    assert creating_episode(created, T0 + 20 * MIN) == f"creating:{T0.isoformat()}"
    assert creating_episode(None, T0 + 20 * MIN) == f"creating:{(T0 + 20 * MIN).isoformat()}"


class Resource:
    def __init__(self, idle_after: timedelta | None = IDLE_RESOURCE_ALERT_AFTER) -> None:
        self.watch: ResourceSeen | None = None
        self.alerts: list[str] = []
        self.idle_after = idle_after

    def poll(self, at: timedelta, status: ResourceStatus, active: int = 0) -> None:
        self.watch, event = observe_resource(
            self.watch,
            status=status,
            active_sessions=active,
            now=T0 + at,
            idle_after=self.idle_after,
        )
        if event is not None:
            self.alerts.append(event.episode)


def test_a_ready_resource_whose_last_session_stopped_is_alerted_once() -> None:
    r = Resource()
    for minute in range(0, 10):
        r.poll(minute * MIN, ResourceStatus.READY, active=1)
    for minute in range(10, 29):
        r.poll(minute * MIN, ResourceStatus.READY)
    assert r.alerts == []
    for minute in range(30, 60):
        r.poll(minute * MIN, ResourceStatus.READY)
    assert r.alerts == [f"idle:{(T0 + 10 * MIN).isoformat()}"]
    # A session attaches, then leaves again: a new idle episode, a new alert.
    r.poll(60 * MIN, ResourceStatus.READY, active=1)
    for minute in range(61, 90):
        r.poll(minute * MIN, ResourceStatus.READY)
    assert len(r.alerts) == 2 and r.alerts[1] == f"idle:{(T0 + 61 * MIN).isoformat()}"


def test_not_ready_is_not_idle_and_the_alert_can_be_off() -> None:
    r = Resource()
    for minute in range(0, 60):
        r.poll(minute * MIN, ResourceStatus.PENDING)
    assert r.alerts == [] and r.watch is not None and r.watch.idle_since is None
    off = Resource(idle_after=None)
    for minute in range(0, 60):
        off.poll(minute * MIN, ResourceStatus.READY)
    assert off.alerts == [] and off.watch is not None and off.watch.idle_since == T0


def test_observed_ready_time_and_spend() -> None:
    r = Resource()
    r.poll(0 * MIN, ResourceStatus.CREATING)
    r.poll(2 * MIN, ResourceStatus.READY)  # became ready somewhere in these 2 min: half
    for minute in range(3, 63):  # an hour seen READY at both ends of each poll
        r.poll(minute * MIN, ResourceStatus.READY)
    r.poll(62 * MIN + MAX_OBSERVED_GAP + MIN, ResourceStatus.READY)  # the bot was down
    r.poll(62 * MIN + MAX_OBSERVED_GAP + 3 * MIN, ResourceStatus.STOPPED)  # half again
    assert r.watch is not None
    assert r.watch.ready_seconds == pytest.approx(60 + 3600 + 60)
    assert estimated_spend(r.watch.ready_seconds, 12.0) == pytest.approx(12.0 * 3720 / 3600)
    assert estimated_spend(100.0, None) is None and estimated_spend(100.0, -1.0) is None


def test_thresholds_keep_their_reasons() -> None:
    """The defaults the module docstring explains: a stall is told well before a
    one-hour inactive timeout expires the session; idle before it stops itself."""
    assert timedelta(minutes=15) == STALL_AFTER and timedelta(hours=1) == STALL_AFTER * 4
    assert timedelta(minutes=30) == CREATING_ALERT_AFTER
    assert timedelta(minutes=20) == IDLE_RESOURCE_ALERT_AFTER


_polls = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=20),  # minutes since the previous poll
        st.sampled_from([None, 0, 1, 2, 3]),  # step as sent
        st.sampled_from(
            [Status.RUNNING, Status.RUNNING, Status.RUNNING, Status.CREATING, Status.STOPPED]
        ),
    ),
    max_size=60,
)


@settings(max_examples=examples(200), deadline=None)
@given(_polls, st.sampled_from([None, 5, 15, 30]))
def test_a_resumed_follows_its_stall_and_no_stall_repeats(
    polls: list[tuple[int, int | None, Status]], minutes: int | None
) -> None:
    s = Session(StallNotice(timedelta(minutes=minutes) if minutes else None))
    at = timedelta(0)
    for gap, step, status in polls:
        at += gap * MIN
        s.poll(at, step, status)
    events = s.events[0]
    for before, event in zip([None, *events], events, strict=False):
        if event.kind == "resumed":  # only ever right after the stall it ends
            assert before is not None and before.kind == "stalled" and before.since == event.since
    stalls = [e.episode for e in events if e.kind == "stalled"]
    assert len(stalls) == len(set(stalls))
    if minutes is None:
        assert events == []
