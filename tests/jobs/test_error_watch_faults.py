"""The org-wide error watch (WATCH_ALL_ERRORS) under what Together may send and
what replicas may get wrong: nothing from outside stops it. Each test drives
real `rl-bot serve` processes against the Slack- and Together-shaped servers.

1. a NUL in any text of a listed error (code, message, name, even the id)
2. replicas whose clocks disagree by more than the watch's restart window
3. error times out of range (year 1 or 9999 with a time zone)
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.support import BotFactory, query, wait_until

pytestmark = pytest.mark.slow

OPS = "COPS"
ENV = {"WATCH_ALL_ERRORS": "true", "ONCALL_CHANNEL": OPS}
LIST_PATH = "/v1/rl/training-sessions?"


def sid(i: int) -> str:
    return f"{i:08d}-e000-4000-8000-000000000000"


def watch_runs(together: FakeTogether) -> int:
    """First-page list requests so far: one per run of the watch."""
    return sum(1 for p in list(together.paths) if p.startswith(LIST_PATH) and "after=" not in p)


def wait_watch_runs(together: FakeTogether, n: int, timeout: float = 30.0) -> None:
    start = watch_runs(together)
    wait_until(lambda: watch_runs(together) >= start + n, timeout=timeout, what=f"{n} watch runs")


def paged(slack: FakeSlack) -> list[str]:
    """Each on-call post, as text and blocks."""
    return [
        (c.text or "") + json.dumps(c.blocks or [], ensure_ascii=False)
        for c in slack.successful_posts(OPS)
    ]


def paged_for(slack: FakeSlack, session_id: str) -> int:
    return sum(session_id in p for p in paged(slack))


def error(code: str = "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED", **over: Any) -> dict[str, Any]:
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"code": code, "message": "the trainer died", "occurred_at": when, **over}


# --- 1. a NUL ------------------------------------------------------------------------------


def test_a_nul_in_a_listed_error_stops_no_other_page(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    """PostgreSQL refuses a NUL in text: an error code with one is still paged
    (its key is made storable), a session whose very id has one is set aside,
    and every other error, then and later, is paged once."""
    nul_id = sid(9)[:-1] + "\x00"
    for i in range(1, 5):
        together.add(sid(i), display_name=f"run-{i}")
    together.add(nul_id, display_name="nul-id-run")
    bot = start_bot(**ENV)
    wait_watch_runs(together, 2)  # the baseline: nothing is in ERROR yet

    together.set_status(sid(1), "ERROR", error=error("CODE_\x00_NUL", message="a\x00b"))
    together.set_status(sid(2), "ERROR", display_name="nul\x00name", error=error())
    together.set_status(nul_id, "ERROR", error=error())
    together.set_status(sid(3), "ERROR", error=error())
    wait_until(lambda: all(paged_for(slack, sid(i)) for i in (1, 2, 3)), what="the three pages")
    together.set_status(sid(4), "ERROR", error=error())  # a later error
    wait_until(lambda: paged_for(slack, sid(4)), what="the later page")
    wait_watch_runs(together, 3)
    assert [paged_for(slack, sid(i)) for i in (1, 2, 3, 4)] == [1, 1, 1, 1]
    if not db_url.startswith("sqlite"):
        assert "set aside" in bot.log()
        assert query(db_url, "SELECT count(*) FROM outbox WHERE kind = 'oncall'") == [(4,)]
    time.sleep(0.5)
    assert [paged_for(slack, sid(i)) for i in (1, 2, 3, 4)] == [1, 1, 1, 1]


# --- 2. replicas whose clocks disagree -----------------------------------------------------


@pytest.mark.parametrize(
    ("first_skew", "second_skew"),
    [("0", "3720"), ("3720", "0")],
    ids=["second-ahead", "first-ahead"],
)
def test_replicas_an_hour_apart_page_every_new_error_once(
    first_skew: str,
    second_skew: str,
    start_bot: BotFactory,
    slack: FakeSlack,
    together: FakeTogether,
    db_url: str,
) -> None:
    """One replica's clock is 1 h 2 min ahead (past the watch's restart window):
    the watch's times are the database's, so neither replica takes the other's
    runs for a watch switched off, and no error is judged by the wrong clock."""
    if db_url.startswith("sqlite"):
        pytest.skip("replicas share a PostgreSQL database")
    for i in range(1, 9):
        together.add(sid(i), display_name=f"run-{i}")
    start_bot(**ENV, REPLICA_ID="r0", FAULT_CLOCK_SKEW_SECONDS=first_skew)
    wait_watch_runs(together, 2)  # the baseline
    start_bot(**ENV, REPLICA_ID="r1", FAULT_CLOCK_SKEW_SECONDS=second_skew)
    wait_watch_runs(together, 4)  # both replicas run the watch by turns
    for i in range(1, 9):
        together.set_status(sid(i), "ERROR", error=error())
    wait_until(
        lambda: all(paged_for(slack, sid(i)) for i in range(1, 9)),
        timeout=30,
        what="all 8 new errors paged",
    )
    wait_watch_runs(together, 4)
    assert [paged_for(slack, sid(i)) for i in range(1, 9)] == [1] * 8
    # The job's times are the database's own, not either replica's.
    [(baseline, last_run)] = query(
        db_url, "SELECT baseline_at, last_run_at FROM jobs WHERE name = 'watch_all_errors'"
    )
    now = datetime.now(UTC).replace(tzinfo=None)
    assert abs(baseline - now) < timedelta(minutes=5) > abs(last_run - now)


# --- 3. times out of range -----------------------------------------------------------------

YEAR_1 = "0001-01-01T00:00:00+05:00"  # before datetime.min once in UTC
YEAR_9999 = "9999-12-31T23:59:59-05:00"  # past datetime.max once in UTC


def test_error_times_out_of_range_never_stop_the_watch(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    """A time that has no UTC equivalent says nothing of when the error happened:
    the watch goes by the session's other time, and pages every new error."""
    for i in range(1, 5):
        together.add(sid(i), display_name=f"run-{i}")
    start_bot(**ENV)
    wait_watch_runs(together, 2)
    together.set_status(sid(1), "ERROR", error=error(occurred_at=YEAR_1))
    together.set_status(sid(2), "ERROR", error=error(occurred_at=YEAR_9999))
    together.set_status(sid(3), "ERROR", created_at=YEAR_1, error=error())
    together.set_status(sid(4), "ERROR", error=error())
    wait_until(lambda: all(paged_for(slack, sid(i)) for i in range(1, 5)), what="all four pages")
    wait_watch_runs(together, 3)
    assert [paged_for(slack, sid(i)) for i in range(1, 5)] == [1] * 4
