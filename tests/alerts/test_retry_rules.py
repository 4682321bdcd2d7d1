"""The back-off of reads that keep failing (pure): the wait doubles with each
failure in a row up to a ceiling, a server's longer Retry-After wins, a success
or a long quiet starts again from the first wait; the subscribed-idle watch keeps its
count in the stored mark, and the W&B reads in the `read_at` they write."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from bot.alerts.backoff import FIRST_SECONDS, FORGET_SECONDS, MOST_SECONDS, Backoff, wait_after
from bot.alerts.subscribed_idle import retry_later
from bot.jobs.metric_reads import RETRY_MOST, next_read_at
from bot.training.poll_progress import IdleCheck, PollProgress
from tests.support.subscribed_idle import NOW, RID, look


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_wait_doubles_up_to_its_ceiling_and_a_longer_retry_after_wins() -> None:
    waits = [wait_after(n) for n in range(1, 9)]
    assert waits[:3] == [FIRST_SECONDS, 2 * FIRST_SECONDS, 4 * FIRST_SECONDS]
    assert waits == sorted(waits) and waits[-1] == MOST_SECONDS
    assert wait_after(10_000) == MOST_SECONDS
    assert wait_after(1, retry_after=120.0) == 120.0
    assert wait_after(1, retry_after=1e9) == MOST_SECONDS
    assert wait_after(1, retry_after=math.nan) == FIRST_SECONDS
    assert wait_after(3, retry_after=1.0) == 4 * FIRST_SECONDS


def test_read_retry_seconds_sets_the_first_wait_and_the_ceiling_stays() -> None:
    assert [wait_after(n, first=8.0) for n in (1, 2, 3)] == [8.0, 16.0, 32.0]
    assert wait_after(1_000, first=8.0) == MOST_SECONDS
    backoff = Backoff(Clock(), first=8.0)
    assert backoff.failed("r1") == 8.0 and backoff.failed("r1") == 16.0


def test_a_key_waits_after_each_failure_and_is_free_again_after_a_success() -> None:
    clock = Clock()
    backoff = Backoff(clock)
    assert backoff.ready("r1")
    assert backoff.failed("r1") == FIRST_SECONDS
    assert not backoff.ready("r1") and backoff.ready("r2")
    clock.now += FIRST_SECONDS
    assert backoff.ready("r1")
    assert backoff.failed("r1") == 2 * FIRST_SECONDS  # the second in a row
    backoff.succeeded("r1")
    assert backoff.ready("r1")
    assert backoff.failed("r1") == FIRST_SECONDS  # a success started the count again


def test_a_failure_long_after_the_last_starts_from_the_first_wait() -> None:
    clock = Clock()
    backoff = Backoff(clock)
    backoff.failed("r1")
    backoff.failed("r1")
    clock.now += FORGET_SECONDS
    assert backoff.failed("r1") == FIRST_SECONDS
    clock.now += FORGET_SECONDS
    backoff.prune()
    assert backoff.ready("r1") and backoff.failed("r1") == FIRST_SECONDS


def test_a_failed_look_is_marked_to_wait_and_counted_in_the_stored_mark() -> None:
    first = retry_later(1, now=NOW, retry_after=None)
    assert first.failures == 1 and first.check_at == NOW + timedelta(seconds=FIRST_SECONDS)
    third = retry_later(3, now=NOW, retry_after=None)
    assert third.check_at == NOW + timedelta(seconds=4 * FIRST_SECONDS)
    stored = IdleCheck.model_validate(third.model_copy(update={"resource_id": RID}).dump())
    assert stored.failures == 3
    # The mark holds the check back until its time, then counts on from it.
    waiting = {"resource_id": RID, "check_at": third.check_at.isoformat(), "failures": 3}
    assert look(idle_check=waiting) is None
    idle = (NOW - timedelta(hours=1)).isoformat()
    due = waiting | {"check_at": (NOW - timedelta(seconds=1)).isoformat(), "idle_since": idle}
    got = look(idle_check=due)
    assert got is not None and got.failures == 3
    assert got.idle_since == NOW - timedelta(hours=1)  # kept through a failed look
    # An old mark without a count reads as none.
    assert PollProgress.model_validate({"idle_check": {"resource_id": RID}}).idle_check is not None
    fresh = look(idle_check={"resource_id": RID, "check_at": due["check_at"]})
    assert fresh is not None and fresh.failures == 0


def test_a_failing_w_and_b_read_puts_the_next_one_off_longer_each_time() -> None:
    now = datetime(2026, 12, 3, 10, 0)
    refresh = timedelta(seconds=300)
    assert next_read_at(now, failures=0, refresh=refresh) == now
    # Read again once `read_at` is `refresh` old: 2, 4, 8 refreshes after the read.
    for failures, waits in ((1, 2), (2, 4), (3, 8)):
        assert next_read_at(now, failures=failures, refresh=refresh) + refresh == now + (
            refresh * waits
        )
    assert next_read_at(now, failures=50, refresh=refresh) + refresh == now + RETRY_MOST
    slow = timedelta(hours=6)  # a refresh longer than the ceiling is kept
    assert next_read_at(now, failures=3, refresh=slow) == now
