"""Every change told once, nothing lost,
nothing repeated, under the faults that broke it. Each test drives real
`rl-bot serve` processes against the Slack- and Together-shaped servers and
counts what Slack received.

1. leases: two replicas, a short lease, a slow Slack (and clocks that disagree)
2. one odd session (over-long status or error code) never blocks the others
3. an unsubscribe is never undone by a send that was in flight
4. only a confirmed Together-shaped 404 ends a subscription
5. the org-wide error watch remembers its alerts past outbox pruning
6. the duplicate check never blocks a delivery (odd answers, time zones, long threads)
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.fakes import FakeSlack, FakeTogether
from tests.support import BotFactory, BotProcess, query, wait_until
from tests.support.threads import SID, notifications, subscribe

pytestmark = pytest.mark.slow

OPS = "COPS"


def is_notification(params: dict[str, Any]) -> bool:
    return "rl_bot_notification" in str(params.get("metadata") or "")


# --- 1. fenced leases ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first_skew", "second_skew"),
    [("0", "0"), ("0", "10"), ("-10", "0")],
    ids=["same-clock", "second-ahead", "first-behind"],
)
def test_two_replicas_with_a_short_lease_and_slow_slack_post_each_row_once(
    first_skew: str,
    second_skew: str,
    start_bot: BotFactory,
    slack: FakeSlack,
    together: FakeTogether,
    db_url: str,
) -> None:
    """12 rows, LEASE_SECONDS=2, one post at a time at 0.5 s each: the first replica's
    batch outlives its lease while a second replica joins. Either replica's clock
    may be 10 s off (more than the lease) in the direction that makes the second
    one think the first one's lease is over."""
    if db_url.startswith("sqlite"):
        pytest.skip("replicas share a PostgreSQL database")
    env = {"LEASE_SECONDS": "2", "DELIVERY_CONCURRENCY": "1"}
    first = start_bot(**env, REPLICA_ID="r0", FAULT_CLOCK_SKEW_SECONDS=first_skew)
    together.add(SID)
    channels = [f"C{i:03d}" for i in range(12)]
    roots = {c: subscribe(first, slack, c) for c in channels}
    slack.method_latency["chat.postMessage"] = 0.5
    together.set_status(SID, "STOPPING")

    def told() -> dict[str, int]:
        return {c: len(notifications(slack, c, roots[c])) for c in channels}

    wait_until(lambda: any(told().values()), timeout=20, what="the first replica posting")
    start_bot(**env, REPLICA_ID="r1", FAULT_CLOCK_SKEW_SECONDS=second_skew)
    wait_until(lambda: all(told().values()), timeout=60, what="every channel told")
    time.sleep(4)  # two more leases: a late repeat would land now
    counts = told()
    posts = sum(counts.values())
    assert counts == dict.fromkeys(channels, 1), (
        f"{posts} posts for 12 rows, {posts - 12} duplicates: {counts}"
    )
    assert query(db_url, "SELECT state, count(*) FROM outbox GROUP BY state") == [("sent", 12)]


@pytest.mark.parametrize("second_skew", ["0", "10"], ids=["same-clock", "second-ahead"])
def test_a_poll_batch_longer_than_its_lease_is_polled_once(
    second_skew: str,
    start_bot: BotFactory,
    slack: FakeSlack,
    together: FakeTogether,
    db_url: str,
) -> None:
    """24 due sessions at TOGETHER_MAX_RPS=3 take 8 s to fetch against a 2 s lease;
    a second replica (whose clock may be 10 s ahead) joins while they are fetched.
    Each session is fetched, and its change told, once."""
    if db_url.startswith("sqlite"):
        pytest.skip("replicas share a PostgreSQL database")
    # No poll before the test makes every session due (a first poll is due at the minimum)
    env = {
        "LEASE_SECONDS": "2",
        "TOGETHER_MAX_RPS": "3",
        "POLL_INTERVAL_SECONDS": "30",
        "POLL_MIN_INTERVAL_SECONDS": "30",
    }
    first = start_bot(**env, REPLICA_ID="r0")
    sids = [f"{i:08d}-0000-4000-8000-000000000000" for i in range(24)]
    roots = {}
    for sid in sids:
        together.add(sid)
        roots[sid] = subscribe(first, slack, "C123", sid)
    for sid in sids:
        together.set_status(sid, "STOPPING")
    together.reset_counts()
    query(db_url, "UPDATE watched_sessions SET next_poll_at = :t", t=datetime(2000, 1, 1))
    wait_until(lambda: together.total_requests, what="the first replica polling")
    start_bot(**env, REPLICA_ID="r1", FAULT_CLOCK_SKEW_SECONDS=second_skew)
    wait_until(
        lambda: all(notifications(slack, "C123", roots[s]) for s in sids),
        timeout=40,
        what="every session told",
    )
    time.sleep(3)
    polls = {sid: together.requests_for(sid) for sid in sids}
    repeated = {sid: n for sid, n in polls.items() if n != 1}
    assert not repeated, f"{len(repeated)} of 24 sessions fetched more than once: {repeated}"
    told = {sid: len(notifications(slack, "C123", roots[sid])) for sid in sids}
    assert set(told.values()) == {1}, told


# --- 2. one odd session never blocks the others ---------------------------------------------


def test_an_overlong_status_or_error_code_blocks_no_other_session(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    """A 67-character status and a 5,000-character error code (fixed-length columns on
    PostgreSQL once) in the same poll batch as a session going to STOPPED."""
    bot = start_bot(ONCALL_CHANNEL=OPS)
    odd, coded, plain = (f"{c * 8}-0000-4000-8000-000000000000" for c in "abc")
    roots = {}
    for sid in (odd, coded, plain):
        together.add(sid)
        roots[sid] = subscribe(bot, slack, "C123", sid)
    odd_status = "TRAINING_SESSION_STATUS_" + "RESHARDING_AFTER_PREEMPTION_" + "X" * 15
    assert len(odd_status) >= 67
    together.set_status(odd, odd_status)
    together.set_status(
        coded,
        "ERROR",
        error={"code": "E" * 5000, "message": "boom", "occurred_at": "2026-01-02T00:00:05Z"},
    )
    together.set_status(plain, "STOPPED")
    wait_until(
        lambda: all(notifications(slack, "C123", roots[s]) for s in (odd, coded, plain)),
        timeout=20,
        what="all three told",
    )
    wait_until(lambda: notifications(slack, OPS), what="on-call alert for the long code")
    time.sleep(2)
    for sid in (odd, coded, plain):
        assert len(notifications(slack, "C123", roots[sid])) == 1, sid
    assert "Stopped" in (notifications(slack, "C123", roots[plain])[0].text or "")
    assert len(notifications(slack, OPS)) == 1
    assert "tick failed" not in bot.log()


def test_a_session_the_database_refuses_is_set_aside_with_one_alert(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    """A status with a NUL character cannot be stored in PostgreSQL text at all: that
    session is isolated from its batch, retried, then set aside with one alert."""
    if db_url.startswith("sqlite"):
        pytest.skip("SQLite stores NUL characters; PostgreSQL refuses them")
    bot = start_bot(ONCALL_CHANNEL=OPS, POLL_INTERVAL_SECONDS="0.2")
    bad, good = (f"{c * 8}-0000-4000-8000-000000000000" for c in "de")
    roots = {}
    for sid in (bad, good):
        together.add(sid)
        roots[sid] = subscribe(bot, slack, "C123", sid)
    together.set_status(bad, "TRAINING_SESSION_STATUS_RUN\x00NING")
    together.set_status(good, "STOPPED")
    wait_until(lambda: notifications(slack, "C123", roots[good]), what="the good session told")
    [alert] = wait_until(lambda: notifications(slack, OPS), timeout=30, what="set-aside alert")
    assert "set aside" in json.dumps({"t": alert.text, "b": alert.blocks}).lower()
    polls = together.requests_for(bad)
    time.sleep(2)
    assert together.requests_for(bad) == polls  # no longer polled
    assert len(notifications(slack, OPS)) == 1
    [(active, failure, failures)] = query(
        db_url,
        "SELECT active, last_failure, write_failures FROM watched_sessions WHERE session_id = :s",
        s=bad,
    )
    assert not active and "set aside" in failure and failures == 5
    assert notifications(slack, "C123", roots[bad]) == []


# --- 3. unsubscribe is final ----------------------------------------------------------------


def test_a_send_in_flight_during_unsubscribe_does_not_bring_the_row_back(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID)
    root = subscribe(bot, slack, "C123")
    slack.method_latency["chat.postMessage"] = 1.5
    # The notification's post is slow and then fails (500): a "retry" result.
    slack.fail_next("chat.postMessage", status=500, when=is_notification)
    together.set_status(SID, "STOPPING")
    wait_until(lambda: slack.in_flight > 0, what="the notification's post in flight")
    bot.command(f"unsubscribe {SID}", response_url=slack.response_url("unsub"))
    assert "nsubscribed" in json.dumps(slack.wait_for_response("unsub"))
    wait_until(
        lambda: any(c.status == 500 for c in slack.calls_to("chat.postMessage")),
        what="the failed post",
    )
    slack.method_latency.clear()
    time.sleep(4)  # the retry would come after 1 s
    assert notifications(slack, "C123", root) == []
    assert query(db_url, "SELECT state FROM outbox WHERE kind = 'transition'") == [("cancelled",)]


def test_a_reply_in_flight_during_unsubscribe_comes_before_the_goodbye(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    """The status change's post is in flight (3 s) when the channel unsubscribes:
    the goodbye waits for it, nothing follows the goodbye, and the root card's
    last redraw offers Subscribe."""
    together.add(SID)
    root = subscribe(bot, slack, "C123")
    slack.slow_when("chat.postMessage", is_notification, 3.0)
    together.set_status(SID, "STOPPING")
    wait_until(lambda: slack.in_flight > 0, what="the notification's post in flight")
    bot.command(f"unsubscribe {SID}", response_url=slack.response_url("unsub"))
    assert "nsubscribed" in json.dumps(slack.wait_for_response("unsub"))
    wait_until(
        lambda: [c for c in slack.posts_in_thread("C123", root) if "no further" in (c.text or "")],
        what="the goodbye",
    )
    wait_until(lambda: slack.in_flight == 0, what="nothing in flight")
    time.sleep(2)  # a late root update or retry would land now
    thread = [c.text or "" for c in slack.posts_in_thread("C123", root)]
    assert "no further updates" in thread[-1], thread
    assert len(thread) <= 2, thread
    last = [u for u in slack.updates("C123", root)][-1]
    assert "rl_subscribe" in json.dumps(last.blocks)
    assert "rl_unsubscribe" not in json.dumps(last.blocks)
    assert query(db_url, "SELECT lease_owner FROM outbox") == [(None,)]


def test_a_row_written_after_its_subscription_ended_is_not_sent(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    """A poll that read the subscription just before it was unsubscribed writes its
    row just after: the fence finds the subscription ended and cancels the row."""
    together.add(SID)
    root = subscribe(bot, slack, "C123")
    bot.command(f"unsubscribe {SID}", response_url=slack.response_url("unsub"))
    assert "nsubscribed" in json.dumps(slack.wait_for_response("unsub"))
    payload = json.dumps({"old_status": "RUNNING", "new_status": "STOPPING"})
    value = "CAST(:p AS JSON)" if db_url.startswith("postgresql") else ":p"
    query(
        db_url,
        "INSERT INTO outbox (dedupe_key, kind, subscription_id, session_id, channel_id, "
        f"thread_ts, payload, state, attempts, next_attempt_at, created_at) SELECT "
        f"'transition:late', 'transition', id, session_id, channel_id, root_ts, {value}, "
        "'pending', 0, :t, :t FROM subscriptions",
        p=payload,
        t=datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=5),
    )
    wait_until(
        lambda: query(db_url, "SELECT state FROM outbox") == [("cancelled",)],
        what="the late row cancelled",
    )
    assert notifications(slack, "C123", root) == []


# --- 4. only Together's own 404, confirmed, ends a subscription -----------------------------


def test_html_404s_end_nothing_and_a_confirmed_json_404_ends_once(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    bot = start_bot(NOT_FOUND_CONFIRM_SECONDS="2")
    sids = [f"{c * 8}-0000-4000-8000-000000000000" for c in "abc"]
    roots = {}
    for sid in sids:
        together.add(sid)
        roots[sid] = subscribe(bot, slack, "C123", sid)
    # A load balancer's page during a deploy, for every session, for several polls.
    for sid in sids:
        together.fail(
            sid, status=404, body="<html><h1>404 Not Found</h1></html>", content_type="text/html"
        )
    wait_until(lambda: all(together.requests_for(s) >= 2 for s in sids), what="HTML 404s")
    time.sleep(3)  # more polls, longer than NOT_FOUND_CONFIRM_SECONDS
    together.clear_faults()
    # One JSON 404 alone is not confirmation either.
    together.fail(sids[1], status=404, times=1)
    time.sleep(2)
    told = {sid: [c.text for c in notifications(slack, "C123", roots[sid])] for sid in sids}
    assert told == {sid: [] for sid in sids}, told
    assert query(db_url, "SELECT count(*) FROM subscriptions WHERE active") == [(3,)]

    together.remove(sids[0])
    gone_at = time.monotonic()
    [post] = wait_until(
        lambda: notifications(slack, "C123", roots[sids[0]]), timeout=20, what="gone told"
    )
    assert time.monotonic() - gone_at >= 1.9  # not before the confirmation window
    assert "no longer exists" in (post.text or "").lower()
    time.sleep(2)
    assert len(notifications(slack, "C123", roots[sids[0]])) == 1
    assert [notifications(slack, "C123", roots[s]) for s in sids[1:]] == [[], []]
    assert query(db_url, "SELECT session_id FROM subscriptions WHERE active ORDER BY 1") == [
        (sids[1],),
        (sids[2],),
    ]


# --- 5. the error watch remembers past the outbox's pruning ---------------------------------


def watch_runs(together: FakeTogether) -> int:
    return sum("/rl/training-sessions?" in p for p in list(together.paths))


def test_the_error_watch_does_not_page_again_after_the_outbox_is_pruned(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    env = {"WATCH_ALL_ERRORS": "true", "ONCALL_CHANNEL": OPS}
    together.add(SID)
    bot = start_bot(**env)
    wait_until(lambda: watch_runs(together) >= 2, what="the watch's baseline")
    together.set_status(SID, "ERROR")
    wait_until(lambda: notifications(slack, OPS), what="the alert")
    bot.stop()
    # Forty days later: the alert's outbox row is past OUTBOX_RETENTION_DAYS (30),
    # and the session is still in ERROR, as failed sessions stay.
    query(
        db_url,
        "UPDATE outbox SET created_at = :t",
        t=datetime.now(UTC).replace(tzinfo=None) - timedelta(days=40),
    )
    runs = watch_runs(together)
    bot = start_bot(**env)  # prunes at start, then watches every second
    wait_until(lambda: "pruned 1 finished outbox rows" in bot.log(), what="pruned")
    assert query(db_url, "SELECT count(*) FROM outbox") == [(0,)]
    wait_until(lambda: watch_runs(together) >= runs + 4, what="four more watch cycles")
    time.sleep(1)
    assert len(notifications(slack, OPS)) == 1


# --- 6. the duplicate check never blocks a delivery -----------------------------------------


ODD_ANSWERS: dict[str, dict[str, Any]] = {
    "C0ERR": {"error": {"code": "an object, not a string"}},
    "C0MSG": {"body": {"ok": True, "messages": "not a list"}},
    "C0ITEM": {"body": {"ok": True, "messages": ["a string", 7, {"metadata": "nope"}]}},
}


def test_odd_answers_to_the_duplicate_check_never_block_a_delivery(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether
) -> None:
    together.add(SID)
    roots = {channel: subscribe(bot, slack, channel) for channel in ODD_ANSWERS}
    for channel, answer in ODD_ANSWERS.items():
        # The first attempt fails (nothing posted); every check after it is odd.
        slack.fail_next(
            "chat.postMessage",
            status=500,
            when=lambda p, c=channel: p.get("channel") == c and is_notification(p),
        )
        slack.fail_next(
            "conversations.replies",
            times=1000,
            when=lambda p, c=channel: p.get("channel") == c,
            **answer,
        )
    together.set_status(SID, "STOPPING")
    wait_until(
        lambda: all(notifications(slack, c, roots[c]) for c in ODD_ANSWERS),
        timeout=20,
        what="every channel told despite the odd check",
    )
    time.sleep(2)
    for channel in ODD_ANSWERS:
        assert len(notifications(slack, channel, roots[channel])) == 1, channel
    assert "delivery failed unexpectedly" not in bot.log()


def test_the_duplicate_check_finds_an_earlier_alert_on_a_host_west_of_utc(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    """On-call alerts have no thread: the check reads channel history from the row's
    creation time, which must be read as UTC whatever the host's zone."""
    bot = start_bot(ONCALL_CHANNEL=OPS, TZ="America/Los_Angeles")
    together.add(SID)
    subscribe(bot, slack, "C123")
    # Slack stores the alert but its answer is lost (a 500 after the write).
    slack.fail_next(
        "chat.postMessage", status=500, after=True, when=lambda p: p.get("channel") == OPS
    )
    together.set_status(SID, "ERROR")
    wait_until(lambda: slack.calls_to("conversations.history"), what="the duplicate check")
    time.sleep(2)
    stored = [m for m in slack.messages_in(OPS) if m.get("metadata")]
    assert len(stored) == 1, f"{len(stored)} alerts in the on-call channel"
    assert "already in Slack" in bot.log()


def test_the_duplicate_check_reads_past_the_first_thousand_replies(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether
) -> None:
    together.add(SID)
    root = subscribe(bot, slack, "C123")
    for i in range(1000):
        slack.add_message("C123", f"chatter {i}", thread_ts=root, user="U999", bot_id=None)
    slack.fail_next("chat.postMessage", status=500, after=True, when=is_notification)
    together.set_status(SID, "STOPPING")
    wait_until(lambda: slack.calls_to("conversations.replies"), what="the duplicate check")
    time.sleep(2)
    ours = [m for m in slack.thread("C123", root) if m.get("metadata")]
    assert len(ours) == 1, f"{len(ours)} notifications in a thread of 1,000 replies"
    assert "already in Slack" in bot.log()


# --- 7. a row Slack always refuses is set aside -----------------------------------------------


def test_a_row_that_always_fails_is_set_aside_and_its_channel_moves_on(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    """chat.postMessage answers 500 to one session's reply, every time: after
    DELIVERY_MAX_ATTEMPTS it is dead, on-call hears once, and the next row in the
    same channel is told."""
    bot = start_bot(ONCALL_CHANNEL=OPS, DELIVERY_MAX_ATTEMPTS="3")
    stuck, fine = (f"{c * 8}-0000-4000-8000-000000000000" for c in "ab")
    together.add(stuck)
    together.add(fine)
    roots = {sid: subscribe(bot, slack, "C123", sid) for sid in (stuck, fine)}
    slack.fail_next(
        "chat.postMessage",
        status=500,
        times=1000,
        when=lambda p: is_notification(p) and p.get("thread_ts") == roots[stuck],
    )
    together.set_status(stuck, "STOPPING")
    wait_until(
        lambda: any(c.status == 500 for c in slack.calls_to("chat.postMessage")),
        what="the first refusal",
    )
    together.set_status(fine, "STOPPING")
    wait_until(lambda: notifications(slack, "C123", roots[fine]), timeout=30, what="next row told")
    [alert] = wait_until(lambda: notifications(slack, OPS), timeout=20, what="on-call told")
    assert "C123" in json.dumps({"t": alert.text, "b": alert.blocks})
    time.sleep(2)
    refused = [c for c in slack.calls_to("chat.postMessage") if c.status == 500]
    assert len(refused) == 3
    assert notifications(slack, "C123", roots[stuck]) == []
    assert len(notifications(slack, "C123", roots[fine])) == 1
    assert len(notifications(slack, OPS)) == 1
    states = query(
        db_url,
        "SELECT session_id, state, attempts FROM outbox WHERE channel_id = 'C123' ORDER BY id",
    )
    assert states == [(stuck, "dead", 3), (fine, "sent", 1)]
    assert "giving up on outbox row" in bot.log()
