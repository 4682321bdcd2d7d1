"""Together faults: timeouts, refused connections, 5xx, 429 with and
without Retry-After, HTML and wrongly shaped bodies, unknown statuses.

Commands must keep being answered (with a clear message for the failing one),
the poller must keep telling the healthy sessions' changes while a failing one
backs off, and operators get exactly one outage alert and one recovery.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from bot.simulated import FakeSlack, FakeTogether, refusing_port
from tests.support import BotFactory, BotProcess, query, wait_until
from tests.support.threads import subscribed_root

OK = "123e4567-e89b-12d3-a456-426614174000"
UNAVAILABLE = "Together is unavailable"
RATE_LIMITED = "rate limiting"
UNREADABLE = "could not read"
# Slack wants the ack within 3 s; Together may take TOGETHER_TIMEOUT_SECONDS (2 s in tests).
ACK_BOUND = 1.9


def utcnow() -> datetime:
    """Naive UTC, as the bot stores its times."""
    return datetime.now(UTC).replace(tzinfo=None)


def as_dt(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def ask(bot: BotProcess, slack: FakeSlack, text: str, token: str, **kw: Any) -> float:
    """Send a command; return how long the ack took."""
    started = time.monotonic()
    response = bot.command(text, response_url=slack.response_url(token), **kw)
    assert response.status_code == 200
    return time.monotonic() - started


def subscribe(bot: BotProcess, slack: FakeSlack, sid: str, channel: str) -> str:
    """Subscribe `channel` to `sid`; return the root message ts."""
    token = f"sub-{channel}-{sid}"
    ask(bot, slack, f"subscribe {sid}", token, channel_id=channel)
    return subscribed_root(slack, token, channel, sid)


def replies(slack: FakeSlack, channel: str, root: str) -> list[str]:
    return [c.text or "" for c in slack.posts_in_thread(channel, root)]


# --- (a) commands ------------------------------------------------------------------------------


@pytest.mark.backend_independent("Together's faults; the outage alert's exactly-once runs on both")
def test_commands_survive_every_together_fault(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether
) -> None:
    together.add(OK)
    together.add("paused-1", status="TRAINING_SESSION_STATUS_PAUSED")
    together.add("flaky-503", status="RUNNING")
    faults: dict[str, dict[str, Any]] = {
        "hang-1": {"delay": 3.0},  # longer than TOGETHER_TIMEOUT_SECONDS=2, every attempt
        "e500-1": {"status": 500},
        "e502-1": {"status": 502, "body": "<html>Bad gateway</html>", "content_type": "text/html"},
        "e503-1": {"status": 503},
        "reset-1": {"disconnect": True},
        "html-1": {"body": "<!doctype html><html>sign in</html>", "content_type": "text/html"},
        "list-1": {"body": "[1, 2, 3]"},
        "noid-1": {"body": json.dumps({"data": [], "has_more": False})},
        "other-1": {"body": json.dumps(together.make_session(OK))},  # someone else's session
        "flaky-503": {"status": 503, "times": 1},
    }
    for sid, fault in faults.items():
        together.fail(sid, **fault)
    acks = {sid: ask(bot, slack, sid, sid) for sid in [*faults, "paused-1"]}
    # Every ack came first, whatever Together does: an ack that waited for Together would
    # take at least TOGETHER_TIMEOUT_SECONDS (2 s) on hang-1; a loaded machine stays below.
    assert max(acks.values()) < ACK_BOUND, acks

    # While the hung request is still waiting on Together, a healthy one is served.
    ask(bot, slack, OK, "ok-during")
    card = slack.wait_for_response("ok-during", timeout=5)
    assert card["response_type"] == "in_channel"
    assert "hang-1" not in slack.responses

    answers = {sid: slack.wait_for_response(sid, timeout=20) for sid in acks}
    expected = {
        "hang-1": UNAVAILABLE,
        "e500-1": UNAVAILABLE,
        "e502-1": UNAVAILABLE,
        "e503-1": UNAVAILABLE,
        "reset-1": UNAVAILABLE,
        "html-1": UNREADABLE,
        "list-1": UNREADABLE,
        "noid-1": UNREADABLE,
        "other-1": UNREADABLE,
    }
    for sid, words in expected.items():
        assert answers[sid]["response_type"] == "ephemeral", sid
        assert words in answers[sid]["text"], (sid, answers[sid]["text"])
        assert "<html" not in json.dumps(answers[sid]).lower(), sid
    # Transient faults were retried a bounded number of times within the user's wait.
    for sid in ("hang-1", "e500-1", "e503-1", "reset-1"):
        assert together.requests_for(sid) == 3, sid
    for sid in ("html-1", "list-1", "noid-1", "other-1"):
        assert 1 <= together.requests_for(sid) <= 3, sid
    # One transient failure is invisible to the user.
    assert answers["flaky-503"]["response_type"] == "in_channel", answers["flaky-503"]
    assert together.requests_for("flaky-503") == 2
    # A 200 with an unknown status is shown humanised, not refused.
    paused = answers["paused-1"]
    assert paused["response_type"] == "in_channel"
    assert "Paused" in json.dumps(paused)

    # ...and the bot is still fine afterwards.
    ask(bot, slack, OK, "ok-after")
    assert slack.wait_for_response("ok-after")["response_type"] == "in_channel"
    assert bot.proc.poll() is None
    assert '"level":"CRITICAL"' not in bot.log()


@pytest.mark.backend_independent("Together's faults; the outage alert's exactly-once runs on both")
def test_commands_under_rate_limits(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether
) -> None:
    """429s are the account's: every command pauses (at most 5 s) rather than each
    hammering on. A long Retry-After is told at once; a short one is waited out."""
    together.add(OK)
    together.add("ra-once", status="RUNNING")
    faults: dict[str, dict[str, Any]] = {
        "r429-1": {"status": 429},
        "r429-30": {"status": 429, "headers": {"Retry-After": "30"}},
        "ra-once": {"status": 429, "headers": {"Retry-After": "1"}, "times": 1},
    }
    for sid, fault in faults.items():
        together.fail(sid, **fault)
    acks = {sid: ask(bot, slack, sid, sid) for sid in faults}
    assert max(acks.values()) < ACK_BOUND, acks
    ask(bot, slack, OK, "ok-during")  # asked during the pause: waits it out, gets its card
    assert slack.wait_for_response("ok-during", timeout=12)["response_type"] == "in_channel"
    answers = {sid: slack.wait_for_response(sid, timeout=20) for sid in faults}
    for sid in ("r429-1", "r429-30"):
        assert answers[sid]["response_type"] == "ephemeral", sid
        assert RATE_LIMITED in answers[sid]["text"], (sid, answers[sid]["text"])
    assert together.requests_for("r429-30") == 1  # a long Retry-After: not sat on
    assert 1 <= together.requests_for("r429-1") <= 3
    assert answers["ra-once"]["response_type"] == "in_channel", answers["ra-once"]
    assert together.requests_for("ra-once") == 2
    waits = [r.at for r in together.requests if r.session_id == "ra-once"]
    assert waits[1] - waits[0] >= 0.9  # a short Retry-After is honoured
    assert bot.proc.poll() is None


@pytest.mark.backend_independent("Together's faults; the outage alert's exactly-once runs on both")
def test_connection_refused_is_told_and_the_bot_keeps_serving(
    start_bot: BotFactory, slack: FakeSlack, db_url: str
) -> None:
    with refusing_port() as port:
        bot = start_bot(TOGETHER_BASE_URL=f"http://127.0.0.1:{port}/v1")
        texts = [OK, f"subscribe {OK}", f"show {OK}"]
        for i, text in enumerate(texts):
            assert ask(bot, slack, text, f"refused-{i}") < ACK_BOUND
        for i in range(len(texts)):
            answer = slack.wait_for_response(f"refused-{i}", timeout=10)
            assert answer["response_type"] == "ephemeral"
            assert UNAVAILABLE in answer["text"]
    help_ = bot.command("help", response_url=slack.response_url("h")).json()
    assert "/rl-session subscribe" in json.dumps(help_)
    assert httpx.get(f"{bot.url}/healthz", timeout=2).status_code == 200
    assert query(db_url, "SELECT count(*) FROM subscriptions") == [(0,)]
    assert slack.successful_posts() == []


# --- (b) the poller --------------------------------------------------------------------------------


@pytest.mark.backend_independent("Together's faults; the outage alert's exactly-once runs on both")
def test_poller_tells_healthy_sessions_while_failing_ones_back_off(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    channel = "CPOLL"
    failing: dict[str, dict[str, Any]] = {
        "f-503": {"status": 503},
        "f-hang": {"delay": 3.0},
        "f-html": {"body": "<html>maintenance</html>", "content_type": "text/html"},
        "f-shape": {"body": json.dumps({"items": [{"id": "f-shape"}]})},
        "f-429": {"status": 429},
        "f-reset": {"disconnect": True},
        "f-429-30": {"status": 429, "headers": {"Retry-After": "30"}},
    }
    roots = {}
    for sid in [OK, "unknown-1", *failing]:
        together.add(sid)
        roots[sid] = subscribe(bot, slack, sid, channel)
    before = {sid: together.requests_for(sid) for sid in failing}
    for sid, fault in failing.items():
        together.fail(sid, **fault)
    together.set_status(OK, "STOPPING")
    together.set_status("unknown-1", "TRAINING_SESSION_STATUS_PAUSED")

    wait_until(lambda: replies(slack, channel, roots[OK]), timeout=20, what="healthy told")
    [told] = replies(slack, channel, roots[OK])
    assert "Running" in told and "Stopping" in told
    wait_until(lambda: replies(slack, channel, roots["unknown-1"]), timeout=20, what="unknown")
    [unknown] = replies(slack, channel, roots["unknown-1"])
    assert "Running" in unknown and "Paused" in unknown
    assert "TRAINING_SESSION_STATUS" not in unknown

    def backed_off() -> dict[str, tuple[Any, ...]] | None:
        rows = query(
            db_url,
            "SELECT session_id, consecutive_failures, next_poll_at, last_polled_at, active, "
            "last_failure FROM watched_sessions",
        )
        by_id = {r[0]: r for r in rows}
        now = utcnow()
        for sid in failing:
            _, failures, next_at, polled_at, active, _ = by_id[sid]
            if not (failures >= 1 and active and polled_at is not None):
                return None
            if as_dt(next_at) <= now or as_dt(next_at) - as_dt(polled_at) < timedelta(seconds=1.9):
                return None  # a poll is due right now or was not backed off
        return by_id

    rows = wait_until(backed_off, timeout=20, what="failing sessions backed off")
    _, _, next_at, polled_at, *_ = rows["f-429-30"]
    assert as_dt(next_at) - as_dt(polled_at) >= timedelta(seconds=29)  # honours Retry-After
    assert as_dt(next_at) - utcnow() >= timedelta(seconds=20)
    ok_row = rows[OK]
    assert ok_row[1] == 0 and ok_row[4]  # the healthy one is fine and still watched
    assert rows["unknown-1"][1] == 0 and rows["unknown-1"][4]

    # The unknown status was stored like any other: leaving it is told as a change too.
    together.set_status("unknown-1", "RUNNING")
    wait_until(lambda: len(replies(slack, channel, roots["unknown-1"])) == 2, what="back")
    assert "Paused" in replies(slack, channel, roots["unknown-1"])[1]
    # Nothing was told for the failures, and nothing crashed.
    for sid in failing:
        assert replies(slack, channel, roots[sid]) == [], sid
    assert together.requests_for("f-429-30") == before["f-429-30"] + 1  # one poll, then waits
    log = bot.log()
    assert "tick failed" not in log and "unexpected error polling" not in log


# --- (c) outage alert -----------------------------------------------------------------------------


def test_together_outage_alerts_once_and_recovers_once(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    ops = "COPS"
    bot = start_bot(
        ONCALL_CHANNEL=ops, TOGETHER_OUTAGE_ALERT_SECONDS="1", POLL_INTERVAL_SECONDS="0.2"
    )
    for sid in (OK, "second-1"):
        together.add(sid)
        subscribe(bot, slack, sid, "C123")
    together.fail(None, status=503)

    [alert] = wait_until(lambda: slack.successful_posts(ops), timeout=20, what="outage alert")
    assert "unreachable" in (alert.text or "").lower()

    def failures() -> int:
        return sum(r[0] for r in query(db_url, "SELECT consecutive_failures FROM watched_sessions"))

    at_alert = failures()
    wait_until(lambda: failures() >= at_alert + 1, timeout=20, what="another failing cycle")
    assert len(slack.successful_posts(ops)) == 1  # still failing: not alerted again

    together.clear_faults()
    wait_until(lambda: len(slack.successful_posts(ops)) >= 2, timeout=30, what="recovered")
    wait_until(lambda: failures() == 0, timeout=20, what="all sessions healthy")
    time.sleep(1.0)  # several healthy cycles
    posts = slack.successful_posts(ops)
    assert len(posts) == 2, [p.text for p in posts]
    assert "recovered" in (posts[1].text or "").lower()
    assert "unreachable" in (posts[1].text or "").lower()
    # the subscribed threads were never told anything about the outage
    assert [c for c in slack.successful_posts("C123") if c.thread_ts] == []
