"""Follow rules and the personal switch through the running bot: signed
`/rl-session follow|unfollow` requests, the discovery job picking sessions from
the Together-shaped server, root cards and DMs on the Slack-shaped one.

One bot per backend is shared by the module (CREATED_BY_USER_MAP maps ana and
bob); each test starts from empty tables.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import BotProcess, wait_until
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
from tests.support.home import click_home, home_views, open_home
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


# --- a rule takes new sessions, once, as subscribe does ---------------------------------------


def test_follow_all_subscribes_new_sessions_once_and_unfollow_stops(rig: Rig) -> None:
    old = sid(1)
    rig.together.add(old, "RUNNING")  # live before the rule, 30 minutes old
    answer = say(rig, "follow all errors-only stall=45m")
    assert "Following every session" in answer
    new = sid(2)
    rig.together.add(new, "RUNNING", created_at=now_iso(), display_name="fresh-run")
    wait_subscribed(rig, "C123", {new})
    [card] = [c for c in roots(rig, "C123") if "fresh-run" in json.dumps(c.blocks)]
    filters, stall = rig.query(
        "SELECT filters, stall_after_minutes FROM subscriptions WHERE session_id = :s", s=new
    )[0]
    assert (filters, stall) == ("errors-only", 45)
    # the rule's thread is the card's: an error is told under it
    rig.together.set_status(new, "ERROR")
    rig.slack.wait_for(
        lambda: rig.slack.posts_in_thread("C123", str(card.ts)), message="the error in the thread"
    )
    settle(rig)
    assert subscribed(rig, "C123") == []  # the errored session's subscription ended
    assert old not in {r[0] for r in rig.query("SELECT session_id FROM subscriptions")}
    assert len([c for c in roots(rig, "C123") if new in json.dumps(c.blocks)]) == 1

    listed = say(rig, "list")
    assert "Follow rules in this channel (1)" in listed and "errors-only" in listed
    assert "already follows" in say(rig, "follow all")  # a repeat of a rule in force
    assert "Removed the rule" in say(rig, "unfollow all")
    say(rig, "follow <@U456|bob>", channel="COTHER")  # keeps discovery running
    later = sid(3)
    rig.together.add(later, "RUNNING", created_at=now_iso())
    settle(rig)
    assert later not in {r[0] for r in rig.query("SELECT session_id FROM subscriptions")}
    assert "no rule following" in say(rig, "unfollow all")


def test_existing_takes_live_sessions_and_an_unsubscribed_one_stays_so(rig: Rig) -> None:
    live, ended = sid(11), sid(12)
    rig.together.add(live, "RUNNING")
    rig.together.add(ended, "STOPPED")
    say(rig, "follow all existing", channel="CEXIST")
    wait_subscribed(rig, "CEXIST", {live})
    say(rig, f"unsubscribe {live}", channel="CEXIST")
    wait_until(lambda: subscribed(rig, "CEXIST") == [], what="unsubscribed")
    settle(rig)
    assert subscribed(rig, "CEXIST") == []  # the rule does not take it back
    assert len([c for c in roots(rig, "CEXIST") if live in json.dumps(c.blocks)]) == 1
    assert ended not in {r[0] for r in rig.query("SELECT session_id FROM subscriptions")}


def test_mine_and_user_go_through_the_user_map(rig: Rig) -> None:
    ana, bob, cara = sid(21), sid(22), sid(23)
    assert "your sessions" in say(rig, "follow mine model=qwen/qwen3.5-4b", channel="CANA")
    assert "U456" in say(rig, "follow <@U456|bob>", channel="CBOB")
    unmapped = say(rig, "follow <@U999|zed>", channel="CBOB")
    assert "Ask your operator" in unmapped and "Slack member ID `U999`" in unmapped
    assert "I do not know your Together user" in say(
        rig, "follow mine", channel="CBOB", user="U777"
    )
    assert "pick the person" in say(rig, "follow @zed", channel="CBOB")
    assert "at most 200 characters" in say(rig, "follow all model=" + "m" * 201)
    for session_id, creator in ((ana, "user_ana"), (bob, "user_bob"), (cara, "user_cara")):
        rig.together.add(session_id, "RUNNING", created_at=now_iso(), created_by=creator)
    rig.together.add(
        sid(24), "RUNNING", created_at=now_iso(), created_by="user_ana", base_model="meta/Llama"
    )
    wait_subscribed(rig, "CANA", {ana})
    wait_subscribed(rig, "CBOB", {bob})
    settle(rig)
    assert subscribed(rig, "CANA") == [ana]  # not bob's, not another model
    assert subscribed(rig, "CBOB") == [bob]
    # the creator's App Home shows the rule
    open_home(rig.bot, "U123")
    [view] = rig.slack.wait_for(lambda: home_views(rig, "U123"), message="home")
    assert "Your follow rules" in view and "CANA" in view


# --- bounds ---------------------------------------------------------------------------------


def test_the_caps_on_rules_and_on_sessions_a_pass(rig: Rig) -> None:
    for n in range(20):
        assert "Following" in say(rig, f"follow all model=m{n}", channel="CCAP")
    refused = say(rig, "follow all model=m20", channel="CCAP")
    assert "20 follow rules" in refused
    assert rig.query("SELECT count(*) FROM follow_rules")[0][0] == 20
    rig.query("DELETE FROM follow_rules")

    many = [sid(100 + n) for n in range(55)]
    for session_id in many:
        rig.together.add(session_id, "RUNNING", checkpoints=0)
    say(rig, "follow all existing", channel="CMANY")
    capped = rig.slack.wait_for(
        lambda: [c for c in rig.slack.successful_posts("CMANY") if "50 a pass" in (c.text or "")],
        timeout=90,  # told after 50 root cards: a minute on a loaded machine
        message="the cap message",
    )
    assert len(capped) == 1 and "found 55 new sessions" in (capped[0].text or "")
    wait_subscribed(rig, "CMANY", set(many))
    assert len(subscribed(rig, "CMANY")) == 55


def test_a_rule_in_an_archived_channel_is_switched_off_and_its_creator_told(rig: Rig) -> None:
    say(rig, "follow all", channel="CARCH")
    rig.slack.set_channel_error("CARCH", "is_archived")
    try:
        rig.together.add(sid(31), "RUNNING", created_at=now_iso())
        told = rig.slack.wait_for(
            lambda: [
                c for c in rig.slack.successful_posts("U123") if "switched off" in (c.text or "")
            ],
            message="the creator's DM",
        )
        assert "archived" in (told[0].text or "")
        assert rig.query("SELECT active, ended_reason FROM follow_rules")[0][0] in (False, 0)
    finally:
        rig.slack.clear_channel_error("CARCH")


# --- replicas -------------------------------------------------------------------------------


def test_two_replicas_discover_each_session_once(rig: Rig, tmp_path: Path) -> None:
    if rig.db_url.startswith("sqlite"):
        pytest.skip("replicas share PostgreSQL; SQLite takes one process")
    second = BotProcess.start(
        workdir=tmp_path,
        db_url=rig.db_url,
        slack=rig.slack,
        together=rig.together,
        env={"CREATED_BY_USER_MAP": USER_MAP, "REPLICA_ID": "second"},
    )
    try:
        say(rig, "follow all", channel="CREP")
        fresh = [sid(200 + n) for n in range(8)]
        for session_id in fresh:
            rig.together.add(session_id, "RUNNING", created_at=now_iso())
        wait_subscribed(rig, "CREP", set(fresh))
        settle(rig)
        assert sorted(subscribed(rig, "CREP")) == sorted(fresh)
        for session_id in fresh:
            cards = [c for c in roots(rig, "CREP") if session_id in json.dumps(c.blocks)]
            assert len(cards) == 1, session_id
    finally:
        second.stop()


# --- the personal switch ----------------------------------------------------------------------


def test_personal_switch_dms_my_session_errors(rig: Rig) -> None:
    click_home(rig.bot, "rl_home_personal", "on", "U123")
    view = rig.slack.wait_for(
        lambda: [v for v in home_views(rig, "U123") if "Turn off" in v], message="switch on"
    )
    assert "Tell me about my sessions" in view[0]
    mine, theirs = sid(41), sid(42)
    rig.together.add(mine, "RUNNING", display_name="ana-run", created_by="user_ana")
    rig.together.add(theirs, "RUNNING", created_by="user_bob")
    wait_until(
        lambda: rig.query("SELECT session_id FROM personal_watches WHERE user_id = 'U123'"),
        what="the switch took ana's session",
    )
    settle(rig)
    assert [r[0] for r in rig.query("SELECT session_id FROM personal_watches")] == [mine]
    # a channel that subscribes and unsubscribes leaves the person's watch running
    say(rig, f"subscribe {mine}", channel="CPERS")
    say(rig, f"unsubscribe {mine}", channel="CPERS")
    assert rig.query("SELECT active FROM watched_sessions WHERE session_id = :s", s=mine)[0][0]
    rig.together.set_status(mine, "ERROR")
    dm = rig.slack.wait_for(lambda: rig.slack.successful_posts("U123"), message="the DM")
    text = json.dumps(dm[0].blocks)
    assert "Your session" in text and "ana-run" in text
    assert subscribed(rig, "C123") == []  # no channel needed
    click_home(rig.bot, "rl_home_personal", "off", "U123")
    rig.slack.wait_for(
        lambda: [v for v in home_views(rig, "U123") if "Turn on" in v], message="switch off"
    )


def test_model_ignores_case_in_matching_repeats_and_unfollow(rig: Rig) -> None:
    assert "Following" in say(rig, "follow all model=Qwen/Qwen3.5-4B", channel="CCASE")
    assert "already follows" in say(rig, "follow all model=qwen/QWEN3.5-4b", channel="CCASE")
    assert rig.query("SELECT count(*) FROM follow_rules")[0][0] == 1
    removed = say(rig, "unfollow all model=QWEN/qwen3.5-4B", channel="CCASE")
    assert "Removed the rule" in removed
    assert rig.query("SELECT count(*) FROM follow_rules")[0][0] == 0
