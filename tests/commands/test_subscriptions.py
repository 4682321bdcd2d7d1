"""Subscriptions end to end: a real `rl-bot serve`, signed Slack requests, the fake
Slack and Together servers, and the real scheduler."""

from __future__ import annotations

import time

import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.support import BotFactory, BotProcess, query, wait_until

SID = "123e4567-e89b-12d3-a456-426614174000"
OPS = "COPS"


def subscribe(
    bot: BotProcess,
    slack: FakeSlack,
    sid: str = SID,
    channel: str = "C123",
    token: str | None = None,
) -> dict[str, object]:
    token = token or f"sub-{channel}-{sid}"
    assert (
        bot.command(
            f"subscribe {sid}", response_url=slack.response_url(token), channel_id=channel
        ).status_code
        == 200
    )
    return slack.wait_for_response(token)


def roots(slack: FakeSlack, channel: str) -> list[str]:
    return [c.ts for c in slack.successful_posts(channel) if c.thread_ts is None and c.ts]


def thread_posts(slack: FakeSlack, channel: str, root: str) -> list[str]:
    return [c.text or "" for c in slack.successful_posts(channel) if c.thread_ts == root]


def test_status_change_told_once_in_thread_root_updated_and_oncall_alerted(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    bot = start_bot(ONCALL_CHANNEL=OPS, ONCALL_MENTION="<!subteam^S0123>")
    together.add(SID, display_name="gsm8k-experiment-2")
    answer = subscribe(bot, slack)
    assert "Subscribed" in str(answer)
    assert answer.get("response_type") == "ephemeral"
    [root] = roots(slack, "C123")
    assert "rl_unsubscribe" in str(slack.successful_posts("C123")[0].blocks)
    stored = query(db_url, "SELECT channel_id, root_ts, subscribed_by, team_id FROM subscriptions")
    assert stored == [("C123", root, "U123", "T1")]

    together.set_status(
        SID,
        "ERROR",
        error={
            "code": "TRAINING_SESSION_ERROR_CODE_OOM",
            "message": "boom <!channel>",
            "occurred_at": "2026-01-02T00:00:05Z",
        },
    )
    wait_until(lambda: thread_posts(slack, "C123", root), what="thread reply")
    wait_until(lambda: slack.successful_posts(OPS), what="on-call alert")
    time.sleep(2.5)  # several more poll cycles: nothing more may be told

    [reply] = thread_posts(slack, "C123", root)
    assert "Running" in reply and "Error" in reply
    assert "&lt;!channel&gt;" in reply and "<!channel>" not in reply
    assert "ended" in reply.lower()
    [alert] = slack.successful_posts(OPS)
    assert "<!subteam^S0123>" in (alert.text or "") + str(alert.blocks)
    assert "https://example.slack.com/archives/C123/" in str(alert.blocks)
    updates = [u for u in slack.updates("C123", root) if u.ok]
    assert updates and "Error" in str(updates[-1].blocks)
    assert "rl_subscribe" in str(updates[-1].blocks)  # the subscription ended
    # terminal: no longer polled
    before = together.requests_for(SID)
    time.sleep(2.2)
    assert together.requests_for(SID) == before
    assert query(db_url, "SELECT active FROM subscriptions") == [(False,)]


def test_subscribe_twice_is_idempotent(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID)
    subscribe(bot, slack, token="a")
    again = subscribe(bot, slack, token="b")
    assert "already subscribed" in str(again)
    assert len(roots(slack, "C123")) == 1
    assert query(db_url, "SELECT count(*) FROM subscriptions") == [(1,)]
    together.set_status(SID, "STOPPING")
    root = roots(slack, "C123")[0]
    wait_until(lambda: thread_posts(slack, "C123", root), what="reply")
    time.sleep(1.5)
    assert len(thread_posts(slack, "C123", root)) == 1


@pytest.mark.backend_independent("Together's 404; nothing is stored")
def test_unknown_session_stores_nothing(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    answer = subscribe(bot, slack, sid="0000dead-0000-4000-8000-000000000000")
    assert "no training session" in str(answer)
    assert answer.get("response_type") == "ephemeral"
    assert slack.successful_posts("C123") == []
    assert query(db_url, "SELECT count(*) FROM subscriptions") == [(0,)]


@pytest.mark.backend_independent("Slack's refusal")
def test_bot_not_in_channel_is_told_to_invite(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID)
    slack.set_channel_error("C999", "not_in_channel")
    answer = subscribe(bot, slack, channel="C999")
    assert "/invite @rl-bot" in str(answer)
    archived = "CARCH"
    slack.set_channel_error(archived, "is_archived")
    assert "archived" in str(subscribe(bot, slack, channel=archived))
    assert "direct messages" in str(subscribe(bot, slack, channel="D0001"))
    assert query(db_url, "SELECT count(*) FROM subscriptions") == [(0,)]


@pytest.mark.backend_independent("which message becomes the root")
def test_subscribe_button_adopts_in_channel_card_or_posts_a_root(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID)
    card_ts = "1700000000.000001"
    r = bot.click(
        "rl_subscribe",
        SID,
        response_url=slack.response_url("b1"),
        channel_id="C1",
        message_ts=card_ts,
        is_ephemeral=False,
    )
    assert r.status_code == 200
    slack.wait_for_response("b1")
    assert query(db_url, "SELECT channel_id, root_ts FROM subscriptions") == [("C1", card_ts)]
    assert roots(slack, "C1") == []
    assert slack.updates("C1", card_ts)

    bot.click(
        "rl_subscribe",
        SID,
        response_url=slack.response_url("b2"),
        channel_id="C2",
        message_ts="1700000000.000002",
        is_ephemeral=True,
    )
    slack.wait_for_response("b2")
    [root] = roots(slack, "C2")
    rows = query(db_url, "SELECT root_ts FROM subscriptions WHERE channel_id = 'C2'")
    assert rows == [(root,)]


def test_list_and_unsubscribe_are_scoped_to_the_channel(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    other = "abcdef12-0000-0000-0000-000000000001"
    together.add(SID, display_name="alpha-run")
    together.add(other, display_name="beta-run")
    subscribe(bot, slack, SID, "C1")
    subscribe(bot, slack, other, "C2")
    subscribe(bot, slack, SID, "C2")

    bot.command("list", response_url=slack.response_url("l1"), channel_id="C1")
    listed = str(slack.wait_for_response("l1"))
    assert SID in listed and other not in listed

    bot.command(f"unsubscribe {SID}", response_url=slack.response_url("u1"), channel_id="C1")
    assert "Unsubscribed" in str(slack.wait_for_response("u1"))
    [root_c1] = roots(slack, "C1")
    wait_until(lambda: any("unsubscribed" in t for t in thread_posts(slack, "C1", root_c1)))
    active = query(
        db_url,
        "SELECT channel_id, session_id FROM subscriptions WHERE active "
        "ORDER BY channel_id, session_id",
    )
    assert active == [("C2", SID), ("C2", other)] or sorted(active) == sorted(
        [("C2", SID), ("C2", other)]
    )

    bot.command("list", response_url=slack.response_url("l2"), channel_id="C2")
    listed2 = str(slack.wait_for_response("l2"))
    assert SID in listed2 and other in listed2
    bot.command(f"unsubscribe {other}", response_url=slack.response_url("u2"), channel_id="C1")
    assert "not subscribed" in str(slack.wait_for_response("u2"))


def test_four_channels_cost_one_request_per_cycle(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    bot = start_bot(POLL_INTERVAL_SECONDS="1")
    together.add(SID)
    for channel in ("C1", "C2", "C3", "C4"):
        subscribe(bot, slack, SID, channel)
    together.reset_counts()
    time.sleep(4.2)
    polls = together.requests_for(SID)
    assert 2 <= polls <= 5, polls  # ~one per second, not four per second
    together.set_status(SID, "STOPPED")
    for channel in ("C1", "C2", "C3", "C4"):
        root = roots(slack, channel)[0]
        wait_until(lambda root=root, channel=channel: thread_posts(slack, channel, root))
    time.sleep(1)
    assert (
        sum(len(thread_posts(slack, c, roots(slack, c)[0])) for c in ("C1", "C2", "C3", "C4")) == 4
    )


def test_slack_500s_and_429s_during_delivery_are_told_once_afterwards(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID)
    subscribe(bot, slack)
    [root] = roots(slack, "C123")
    slack.fail_next("chat.postMessage", status=500, times=2)
    slack.fail_next("chat.postMessage", status=429, retry_after=1, times=1)
    together.set_status(SID, "STOPPING")
    wait_until(lambda: thread_posts(slack, "C123", root), timeout=20, what="told after faults")
    time.sleep(2)
    assert len(thread_posts(slack, "C123", root)) == 1
    failed = [c for c in slack.calls_to("chat.postMessage") if not c.ok]
    assert len(failed) == 3
    assert query(db_url, "SELECT state, attempts FROM outbox") == [("sent", 4)]


def test_archived_channel_ends_the_subscription_without_a_retry_loop(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID)
    subscribe(bot, slack)
    slack.set_channel_error("C123", "is_archived")
    together.set_status(SID, "STOPPING")
    wait_until(lambda: query(db_url, "SELECT state FROM outbox") == [("dead",)], what="dead row")
    time.sleep(1.5)
    attempts = [c for c in slack.calls_to("chat.postMessage") if c.channel == "C123" and not c.ok]
    assert len(attempts) == 1
    assert query(db_url, "SELECT active, ended_reason FROM subscriptions") == [
        (False, "slack refused delivery")
    ]


def test_restart_with_the_same_database_loses_nothing_and_repeats_nothing(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    bot = start_bot()
    together.add(SID)
    subscribe(bot, slack)
    [root] = roots(slack, "C123")
    together.set_status(SID, "STOPPING")
    wait_until(lambda: thread_posts(slack, "C123", root))
    assert bot.terminate() in (0, -15)  # uvicorn re-raises SIGTERM after a clean shutdown
    assert "releasing leases" in bot.log()
    together.set_status(SID, "STOPPED")  # changes while no bot runs
    bot2 = start_bot()
    wait_until(lambda: len(thread_posts(slack, "C123", root)) == 2, what="second transition")
    bot2.terminate()
    start_bot()
    time.sleep(2.5)
    posts = thread_posts(slack, "C123", root)
    assert len(posts) == 2, posts
    assert "Stopping" in posts[1] and "Stopped" in posts[1]


def test_session_gone_is_told_once_and_closed(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    bot = start_bot(NOT_FOUND_CONFIRM_SECONDS="1")  # a 404 counts once it has lasted 1 s
    together.add(SID)
    subscribe(bot, slack)
    [root] = roots(slack, "C123")
    together.remove(SID)
    wait_until(lambda: thread_posts(slack, "C123", root))
    time.sleep(2)
    [post] = thread_posts(slack, "C123", root)
    assert "no longer exists" in post.lower() or "gone" in post.lower()
    assert query(db_url, "SELECT active FROM watched_sessions") == [(False,)]


def test_together_key_rejected_alerts_operators_once(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    bot = start_bot(ONCALL_CHANNEL=OPS)
    together.add(SID)
    subscribe(bot, slack)
    together.fail(None, status=401)
    wait_until(lambda: slack.successful_posts(OPS), what="operator alert")
    time.sleep(3)
    [alert] = slack.successful_posts(OPS)
    assert "key" in (alert.text or "").lower()
    together.clear_faults()
    wait_until(lambda: len(slack.successful_posts(OPS)) == 2, what="recovered message")
    assert "recovered" in (slack.successful_posts(OPS)[1].text or "").lower()
