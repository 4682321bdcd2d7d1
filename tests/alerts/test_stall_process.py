"""Stall and slow-start alerts, through real `rl-bot serve` processes
and the Slack- and Together-shaped servers: a training client that dies (the
step freezes while the session stays RUNNING) is told once, its recovery once,
nothing is repeated across a restart or by a second replica; a session stuck
CREATING is told once; `stall=off` and a longer `stall=` are honoured."""

from __future__ import annotations

import json
import time

import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.support import BotFactory, BotProcess, query, wait_until

SID = "5a3e4567-e89b-12d3-a456-426614174000"
SID2 = "6b3e4567-e89b-12d3-a456-426614174000"
OPS = "COPS"
# 3 s instead of 15 min, so a test sees a stall in seconds; polls every second.
FAST = {"STALL_AFTER_MINUTES": "0.05", "ONCALL_CHANNEL": OPS, "ONCALL_ON_STALL": "true"}


def ask(bot: BotProcess, slack: FakeSlack, text: str, *, channel: str, token: str) -> str:
    r = bot.command(text, response_url=slack.response_url(token), channel_id=channel)
    assert r.status_code == 200, r.text
    if r.content.strip():
        return r.text
    return json.dumps(slack.wait_for_response(token))


def subscribe(bot: BotProcess, slack: FakeSlack, text: str, channel: str) -> str:
    answer = ask(bot, slack, f"subscribe {text}", channel=channel, token=f"sub-{channel}")
    assert "Subscribed" in answer, answer
    return next(c.ts for c in slack.successful_posts(channel) if c.thread_ts is None and c.ts)


def thread(slack: FakeSlack, channel: str, root: str, words: str) -> list[str]:
    posts = [
        (c.text or "") + json.dumps(c.blocks or [], ensure_ascii=False)
        for c in slack.successful_posts(channel)
        if c.thread_ts == root
    ]
    return [p for p in posts if words in p]


def card(slack: FakeSlack, channel: str, root: str) -> str:
    """The root card as last updated."""
    updates = slack.updates(channel, root)
    return json.dumps(updates[-1].blocks, ensure_ascii=False) if updates else ""


def pages(slack: FakeSlack) -> list[str]:
    return [c.text or "" for c in slack.successful_posts(OPS) if "no progress" in (c.text or "")]


def test_a_dead_client_is_told_once_resumed_once_across_a_restart_and_replicas(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID, "RUNNING", step="1234")
    replicas = 2 if db_url.startswith("postgresql") else 1
    bots = [start_bot(**FAST, REPLICA_ID=f"r{i}") for i in range(replicas)]
    root = subscribe(bots[0], slack, SID, "C123")
    off = subscribe(bots[0], slack, f"{SID} stall=off", "C456")
    later = subscribe(bots[0], slack, f"{SID} stall=30m", "C789")

    wait_until(lambda: thread(slack, "C123", root, "No progress for"), what="stalled", timeout=20)
    [stalled] = thread(slack, "C123", root, "No progress for")
    assert "step 1,234" in stalled and "training client may have stopped" in stalled
    # No spend watch: the idle-out time is the bot's estimate, and says so.
    assert "idles out at about" in stalled and "estimated" in stalled
    wait_until(lambda: pages(slack), what="on-call page")
    # The root card shows the stall (before its buttons) until it ends.
    wait_until(lambda: "No progress* since" in card(slack, "C123", root), what="card flag")
    time.sleep(3)  # three more polls of a frozen step
    assert len(thread(slack, "C123", root, "No progress for")) == 1
    assert len(pages(slack)) == 1 and "<!channel>" not in pages(slack)[0]

    # A restart (and, on PostgreSQL, a second replica all along) repeats nothing.
    for bot in bots:
        bot.stop()
    bots = [start_bot(**FAST, REPLICA_ID=f"s{i}") for i in range(replicas)]
    time.sleep(4)
    assert len(thread(slack, "C123", root, "No progress for")) == 1
    assert len(pages(slack)) == 1

    together.set_status(SID, "RUNNING", step="1240")
    wait_until(lambda: thread(slack, "C123", root, "Progress resumed"), what="resumed")
    time.sleep(3)
    [resumed] = thread(slack, "C123", root, "Progress resumed")
    # The first redraw at step 1240 is the resumed one: no flag (a new stall may follow).
    resumed_cards = [
        json.dumps(u.blocks) for u in slack.updates("C123", root) if "1240" in json.dumps(u.blocks)
    ]
    assert resumed_cards and "No progress" not in resumed_cards[0]
    assert "1,234 → 1,240" in resumed
    # The frozen step 1,234 was told once; step 1,240 standing still since is a new episode.
    first = [p for p in thread(slack, "C123", root, "No progress for") if "step 1,234" in p]
    assert len(first) == 1
    # stall=off hears nothing; stall=30m has not been stalled long enough.
    for channel, ts in (("C456", off), ("C789", later)):
        assert thread(slack, channel, ts, "progress") == []
        assert thread(slack, channel, ts, "No progress") == []
    rows = query(db_url, "SELECT dedupe_key FROM outbox WHERE kind = 'progress'")
    kinds = [r[0].split(":")[0] for r in rows]
    assert kinds.count("resumed") == 1 and {"stalled", "stall-page"} <= set(kinds)


def test_a_session_stuck_creating_is_told_once(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    session = together.add(SID2, "CREATING", step="0")
    together.set_resource(session["model_resources_id"], "PENDING", queue_position=4)
    bot = start_bot(CREATING_ALERT_AFTER_MINUTES="0.05", STALL_AFTER_MINUTES="0.05")
    root = subscribe(bot, slack, SID2, "C123")
    wait_until(lambda: thread(slack, "C123", root, "Still creating"), what="slow start")
    time.sleep(3)
    [told] = thread(slack, "C123", root, "Still creating")
    assert "Still creating after 30 min" in told  # since Together's created_at
    assert "Queue position:* 4" in told and "queue position 4" in told  # its resource's
    assert thread(slack, "C123", root, "No progress") == []  # CREATING is not a stall


@pytest.mark.backend_independent("input refused before anything is stored")
def test_bad_stall_options_are_refused(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    together.add(SID)
    bot = start_bot()
    for i, text in enumerate(["stall=soon", "stall=0m", "stall=1m stall=2m", "stall=31d"]):
        answer = ask(bot, slack, f"subscribe {SID} {text}", channel="C123", token=f"bad-{i}")
        assert "stall=" in answer and "Subscribed" not in answer, answer
    assert slack.successful_posts("C123") == []


@pytest.mark.parametrize("option", ["stall=45m", "stall=off"])
@pytest.mark.backend_independent("one column written and read back; the stall itself runs on both")
def test_stall_option_is_stored_and_said(
    option: str, start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID)
    bot = start_bot()
    answer = ask(bot, slack, f"subscribe {SID} {option}", channel="C123", token="opt")
    expected = "stall alerts off" if option == "stall=off" else "stalled after 45 min"
    assert expected in answer, answer
    stored = query(db_url, "SELECT stall_after_minutes FROM subscriptions")
    assert stored == [(0 if option == "stall=off" else 45,)]


@pytest.mark.backend_independent("the stall's words; the told-once row is tested on both")
def test_with_the_spend_watch_the_stall_names_the_resources_own_expiry(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    rid = "7c3e4567-e89b-12d3-a456-426614174000"
    together.add_resource(rid, "READY", expires_at="2030-01-02T03:04:05Z")
    together.add(SID, "RUNNING", step="500", model_resources_id=rid)
    bot = start_bot(**FAST, SPEND_WATCH="true")
    root = subscribe(bot, slack, SID, "C123")
    wait_until(lambda: thread(slack, "C123", root, "No progress for"), what="stalled", timeout=20)
    [stalled] = thread(slack, "C123", root, "No progress for")
    assert "the resource idles out at <!date^1893553445^" in stalled, stalled
    assert "2030-01-02T03:04:05Z" in stalled and "estimated" not in stalled
    # The card keeps the resource's lines next to the stall flag.
    wait_until(lambda: "No progress* since" in card(slack, "C123", root), what="card flag")
    assert "Ready (billing)" in card(slack, "C123", root)
