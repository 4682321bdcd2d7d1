"""Crashes at every step of a cycle, several replicas on one PostgreSQL,
a database that drops its connections, SIGTERM, an unmigrated schema.

Crashes are real: `FAULT_CRASH_AT=<step>` makes the process SIGKILL itself
at that step; then a fresh process takes over and we count what the
Slack-shaped server received."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest

from bot.ops.faults import STEPS
from bot.simulated import FakeSlack, FakeTogether
from tests.conftest import PG_BASE, BotLauncher
from tests.support import BotFactory, BotProcess, base_env, pg_admin, query, wait_until

SID = "123e4567-e89b-12d3-a456-426614174000"
OPS = "COPS"
FAST_LEASE = {"LEASE_SECONDS": "2", "ALLOW_SHORT_LEASES": "true", "ONCALL_CHANNEL": OPS}


def _subscribe(bot: BotProcess, slack: FakeSlack, channel: str = "C123") -> str:
    token = f"s-{uuid.uuid4().hex[:6]}"
    bot.command(f"subscribe {SID}", response_url=slack.response_url(token), channel_id=channel)
    assert "Subscribed" in str(slack.wait_for_response(token))
    return next(c.ts for c in slack.successful_posts(channel) if c.thread_ts is None and c.ts)


def _thread(slack: FakeSlack, root: str, channel: str = "C123") -> list[str]:
    return [c.text or "" for c in slack.successful_posts(channel) if c.thread_ts == root]


@pytest.mark.parametrize("step", STEPS)
def test_sigkill_at_every_step_tells_each_transition_exactly_once(
    step: str,
    start_bot: BotFactory,
    launch_bot: BotLauncher,
    slack: FakeSlack,
    together: FakeTogether,
    db_url: str,
) -> None:
    together.add(SID)
    first = start_bot(**FAST_LEASE)
    root = _subscribe(first, slack)
    first.terminate()

    together.set_status(SID, "ERROR")
    doomed = launch_bot("doomed", env={**FAST_LEASE, "FAULT_CRASH_AT": step}, wait=False)
    assert doomed.proc.wait(timeout=30) == -9, doomed.log()
    assert f"SIGKILL at {step}" in doomed.log()

    start_bot(**FAST_LEASE)
    wait_until(
        lambda: _thread(slack, root) and slack.successful_posts(OPS),
        timeout=20,
        what="transition and alert after the crash",
    )
    time.sleep(3)  # leases of 2 s have long expired; several cycles have run
    assert len(_thread(slack, root)) == 1, _thread(slack, root)
    assert len(slack.successful_posts(OPS)) == 1
    # the transition, on-call's alert, and the thread's final chart (sent at most once);
    # a transition whose post went out owes only its card, which waits for the chart
    wait_until(
        lambda: query(db_url, "SELECT count(*) FROM outbox WHERE state = 'pending'") == [(0,)],
        timeout=20,
        what="every row done",
    )
    rows = sorted(query(db_url, "SELECT kind, state FROM outbox"))
    assert rows == [("chart", "sent"), ("oncall", "sent"), ("transition", "sent")], rows


@pytest.mark.parametrize("replicas", [2, 3])
def test_replicas_on_postgresql_tell_a_change_once(
    replicas: int, start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    if db_url.startswith("sqlite"):
        pytest.skip("replicas share a PostgreSQL database")
    bots = [start_bot(ONCALL_CHANNEL=OPS, REPLICA_ID=f"r{i}") for i in range(replicas)]
    together.add(SID)
    root = _subscribe(bots[-1], slack)
    together.set_status(SID, "ERROR")
    wait_until(lambda: _thread(slack, root) and slack.successful_posts(OPS), what="told")
    time.sleep(3)
    assert len(_thread(slack, root)) == 1
    assert len(slack.successful_posts(OPS)) == 1
    polls = together.requests_for(SID)
    assert polls <= 8, f"{replicas} replicas polled {polls} times in ~4 s: work not shared"


def test_replica_killed_mid_lease_is_taken_over_within_the_lease(
    start_bot: BotFactory,
    launch_bot: BotLauncher,
    slack: FakeSlack,
    together: FakeTogether,
    db_url: str,
) -> None:
    """A replica killed with -9 right after its claim: its heartbeat stops, and another
    replica takes the session once that heartbeat is a quarter of a lease old (5 s of
    a 20 s lease, written every 2 s), however lately the lease was taken, not when
    the lease runs out; what it waited is on /metrics."""
    if db_url.startswith("sqlite"):
        pytest.skip("replicas share a PostgreSQL database")
    lease = {"LEASE_SECONDS": "20"}
    survivor = start_bot(**lease, REPLICA_ID="survivor", POLL_INTERVAL_SECONDS="1")
    together.add(SID)
    root = _subscribe(survivor, slack)
    # Make the session due now and let the doomed replica claim it first.
    survivor.terminate()
    together.set_status(SID, "STOPPING")
    doomed = launch_bot(
        "doomed",
        env={**lease, "REPLICA_ID": "doomed", "FAULT_CRASH_AT": "poll_after_claim"},
        wait=False,
    )
    assert doomed.proc.wait(timeout=30) == -9
    died = time.monotonic()
    assert query(db_url, "SELECT lease_owner FROM watched_sessions") == [("doomed",)]
    assert query(db_url, "SELECT owner FROM replica_spend") == [("doomed",)]  # its heartbeat
    heir = start_bot(**lease, REPLICA_ID="survivor-2")
    wait_until(lambda: _thread(slack, root), timeout=30, what="taken over")
    took = time.monotonic() - died
    assert 3.0 <= took < 12.0, f"taken over {took:.1f}s after the kill, on a 20 s lease"
    time.sleep(1.5)
    assert len(_thread(slack, root)) == 1
    assert heir.metric('rlbot_leases_adopted_total{work="session"}') == 1
    waited = heir.metric('rlbot_lease_takeover_seconds_sum{work="session"}')
    assert waited is not None and 3.0 <= waited < 12.0, waited
    assert "took over 1 sessions" in heir.log()


def test_database_connections_dropped_the_next_cycle_recovers(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    if db_url.startswith("sqlite"):
        pytest.skip("a PostgreSQL restart drops server-side connections")
    together.add(SID)
    root = _subscribe(bot, slack)
    name = db_url.rsplit("/", 1)[1]
    # What a PostgreSQL restart does to the bot: every connection it holds dies.
    pg_admin(
        PG_BASE, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
    )
    together.set_status(SID, "STOPPING")
    wait_until(lambda: _thread(slack, root), timeout=20, what="told after reconnect")
    assert bot.proc.poll() is None
    together.add("abcdef12-0000-0000-0000-000000000009")
    token = "after"
    bot.command("abcdef12-0000-0000-0000-000000000009", response_url=slack.response_url(token))
    assert "abcdef12" in str(slack.wait_for_response(token))


def test_sigterm_finishes_the_running_cycle_and_releases_leases(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    bot = start_bot(TOGETHER_TIMEOUT_SECONDS="5")
    together.add(SID)
    root = _subscribe(bot, slack)
    together.latency = 1.5
    together.set_status(SID, "STOPPING")
    wait_until(lambda: together.in_flight > 0, what="a poll in flight")
    assert bot.terminate() in (0, -15)
    assert "releasing leases" in bot.log()
    assert query(db_url, "SELECT count(*) FROM watched_sessions WHERE lease_owner IS NOT NULL") == [
        (0,)
    ]
    assert query(db_url, "SELECT count(*) FROM outbox WHERE lease_owner IS NOT NULL") == [(0,)]
    # The in-flight poll finished and its change was stored before exit.
    assert query(db_url, "SELECT last_status FROM watched_sessions") == [
        ("TRAINING_SESSION_STATUS_STOPPING",)
    ]
    together.latency = 0
    start_bot()
    wait_until(lambda: _thread(slack, root), what="told by the next process")
    time.sleep(1.5)
    assert len(_thread(slack, root)) == 1


@pytest.mark.slow  # runs rl-bot as a subprocess
def test_unmigrated_postgresql_schema_refuses_to_start_clearly(
    slack: FakeSlack,
    together: FakeTogether,
    tmp_path_factory: pytest.TempPathFactory,
    db_url: str,
) -> None:
    if db_url.startswith("sqlite"):
        pytest.skip("SQLite migrates itself")
    name = f"rlbot_empty_{uuid.uuid4().hex[:8]}"
    pg_admin(PG_BASE, f'CREATE DATABASE "{name}"')
    try:
        env = base_env(db_url=f"{PG_BASE}/{name}", slack=slack, together=together)
        done = subprocess.run(
            [sys.executable, "-m", "bot", "serve", "--port", "0"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path_factory.mktemp("nomig"),
        )
        assert done.returncode == 3
        assert "rl-bot migrate" in done.stderr
        migrate = subprocess.run(
            [sys.executable, "-m", "bot", "migrate"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path_factory.mktemp("mig"),
        )
        assert migrate.returncode == 0, migrate.stderr
    finally:
        pg_admin(PG_BASE, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
