"""Follow rules when subscribing fails, through the running bot and the Slack- and
Together-shaped servers: a passing refusal is tried again (backing off, a few
times at most), the backlog notice tells what happened once, and a session
whose snapshot the database cannot store leaves no card behind.

One bot per backend is shared by the module; each test starts from empty tables.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest

from bot.jobs.follow_retry import MAX_ATTEMPTS, backoff
from tests.support import wait_until
from tests.support.follow import (
    FOLLOW_TABLES,
    USER_MAP,
    now_iso,
    roots,
    say,
    settle,
    sid,
    subscribed,
    wait_subscribed,
)
from tests.support.rig import Rig, shared_rig

pytestmark = pytest.mark.slow

# A budget these runs' reads fit: the tests' poll (a GET per session every second)
# would otherwise hold the budget's free part, and discovery would run on its floor
# alone; discovery under a busy budget is tests/process/test_one_budget.py's.
rig = shared_rig(
    CREATED_BY_USER_MAP=USER_MAP, TOGETHER_TIMEOUT_SECONDS="5", TOGETHER_REQUESTS_PER_MINUTE="1200"
)


@pytest.fixture(autouse=True)
def _fresh(rig: Rig) -> Iterator[None]:
    with rig.fresh():
        for table in FOLLOW_TABLES:
            rig.query(f"DELETE FROM {table}")
        yield


def card_posts(rig: Rig, channel: str, session_id: str) -> list[Any]:
    """Every attempt at posting a root card of this session, refused ones too."""
    return [
        c
        for c in rig.slack.calls_to("chat.postMessage")
        if c.channel == channel and c.thread_ts is None and session_id in json.dumps(c.blocks)
    ]


def is_card_of(channel: str, session_id: str) -> Any:
    return lambda p: p.get("channel") == channel and session_id in str(p.get("blocks"))


@pytest.mark.backend_independent("Slack's refusals and the back-off")
def test_a_passing_slack_refusal_of_the_card_is_tried_again(rig: Rig) -> None:
    say(rig, "follow all", channel="CPASS")
    refusals: list[dict[str, Any]] = [
        {"error": "internal_error"},
        {"error": "fatal_error"},
        {"error": "service_unavailable"},
        {"status": 429, "retry_after": 0, "times": 3},  # outlasts the client's 2 retries
        {"status": 503, "times": 3},
    ]
    ids = [sid(300 + n) for n in range(len(refusals))]
    for session_id, refusal in zip(ids, refusals, strict=True):
        times = refusal.pop("times", 1)
        rig.slack.fail_next(
            "chat.postMessage", when=is_card_of("CPASS", session_id), times=times, **refusal
        )
        rig.together.add(session_id, "RUNNING", created_at=now_iso())
    wait_subscribed(rig, "CPASS", set(ids))
    for session_id in ids:
        cards = [c for c in roots(rig, "CPASS") if session_id in json.dumps(c.blocks)]
        assert len(cards) == 1, session_id


@pytest.mark.backend_independent("Slack's refusals and the back-off")
def test_refused_sessions_are_tried_less_often_and_the_backlog_told_once(rig: Rig) -> None:
    many = [sid(400 + n) for n in range(55)]
    for session_id in many:
        rig.together.add(session_id, "RUNNING", checkpoints=0)
    # every card refused for now; the channel itself is fine (the notice gets through)
    rig.slack.fail_next(
        "chat.postMessage",
        error="internal_error",
        times=10**6,
        when=lambda p: p.get("channel") == "CBACK" and "found" not in str(p.get("text")),
    )
    say(rig, "follow all existing", channel="CBACK")
    for _ in range(4):
        settle(rig)
    notices = [c for c in rig.slack.successful_posts("CBACK") if "found" in (c.text or "")]
    assert len(notices) == 1
    text = notices[0].text or ""
    assert "found 55 new sessions" in text and "I subscribed 0 " in text
    assert "50 sessions could not be subscribed yet" in text
    assert subscribed(rig, "CBACK") == []
    tries = {s: [c.at for c in card_posts(rig, "CBACK", s)] for s in many}
    # every one tried, MAX_ATTEMPTS times at most, and each wait at least the back-off
    # (1, 2, 4 … poll intervals): a loaded machine makes waits longer, never shorter
    assert min(len(at) for at in tries.values()) >= 1
    assert max(len(at) for at in tries.values()) <= MAX_ATTEMPTS
    assert max(len(at) for at in tries.values()) >= 3, "the back-off was never seen twice"
    for session_id, at in tries.items():
        gaps = [later - earlier for earlier, later in pairwise(at)]
        for failures, gap in enumerate(gaps, start=1):
            assert gap >= 0.9 * backoff(failures, base=1.0), (session_id, gaps)


def test_a_session_the_database_cannot_store_leaves_no_card(rig: Rig) -> None:
    refused = sid(501)
    pg = not rig.db_url.startswith("sqlite")
    if pg:
        rig.query(
            "CREATE OR REPLACE FUNCTION refuse_watch() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION 'refused' USING ERRCODE = 'data_exception'; END $$ "
            "LANGUAGE plpgsql"
        )
        rig.query(
            "CREATE TRIGGER refuse_watch BEFORE INSERT ON watched_sessions FOR EACH ROW "
            f"WHEN (NEW.session_id = '{refused}') EXECUTE FUNCTION refuse_watch()"
        )
    else:
        rig.query(
            "CREATE TRIGGER refuse_watch BEFORE INSERT ON watched_sessions "
            f"WHEN NEW.session_id = '{refused}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
    try:
        say(rig, "follow all", channel="CSTORE")
        rig.together.add(refused, "RUNNING", created_at=now_iso())
        posted = wait_until(lambda: card_posts(rig, "CSTORE", refused), what="a card posted")
        for _ in range(3):
            settle(rig)
        assert len(card_posts(rig, "CSTORE", refused)) == 1  # a repeat posts nothing new
        deleted = [c.params.get("ts") for c in rig.slack.successful("chat.delete")]
        assert posted[0].ts in deleted  # the card was taken back
        assert subscribed(rig, "CSTORE") == []
    finally:
        rig.query("DROP TRIGGER refuse_watch" + (" ON watched_sessions" if pg else ""))


def test_non_finite_floats_are_stored_as_null(rig: Rig) -> None:
    huge = {"rank": 8, "alpha": 16, "dropout": float("inf"), "seed": "7"}
    wandb = {"entity": "e", "project": "p", "run_id": "r", "url": "https://w", "lr": -1e999}
    by_hand, by_rule = sid(601), sid(602)
    rig.together.add(by_hand, "RUNNING", lora_config=huge, metadata={"wandb": wandb})
    assert "Subscribed" in say(rig, f"subscribe {by_hand}", channel="CINF")
    say(rig, "follow all", channel="CINF")
    rig.together.add(
        by_rule, "RUNNING", created_at=now_iso(), lora_config=huge, metadata={"wandb": wandb}
    )
    wait_subscribed(rig, "CINF", {by_hand, by_rule})
    settle(rig)
    for session_id in (by_hand, by_rule):
        assert len(card_posts(rig, "CINF", session_id)) == 1
        [(raw,)] = rig.query(
            "SELECT snapshot FROM watched_sessions WHERE session_id = :s", s=session_id
        )
        snapshot = json.loads(raw) if isinstance(raw, str) else raw
        assert snapshot["lora_config"]["dropout"] is None
        assert snapshot["metadata"]["wandb"]["lr"] is None
