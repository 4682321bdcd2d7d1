"""Names are ids: signed `/rl-session` commands that name a session by its display
name, against one real `rl-bot serve` per module and the Together- and
Slack-shaped servers. One match is used; several are listed with their ids and
a button each that runs the command again with that id; none is answered
"no session named …". The name is looked up in one read of Together's list,
booked in the request budget like any command's request."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import httpx
import pytest

from tests.support.home import open_home
from tests.support.rig import Rig, ask, shared_rig

SID_A = "0b6d1c2e-1111-4000-8000-00000000000a"
SID_B = "0b6d1c2e-2222-4000-8000-00000000000b"
SID_C = "0b6d1c2e-3333-4000-8000-00000000000c"
UNKNOWN_UUID = "0b6d1c2e-9999-4000-8000-00000000009f"
SETTING = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")

rig = shared_rig()


@pytest.fixture(autouse=True)
def _fresh(rig: Rig) -> Any:
    with rig.fresh():
        yield


def _channel() -> str:
    return f"C{uuid.uuid4().hex[:10].upper()}"


def _routes(rig: Rig) -> list[tuple[str, str]]:
    """Together's requests since the reset: (route, path)."""
    with rig.together._lock:
        return [(r.route, r.path) for r in rig.together.requests]


def _spent(rig: Rig, kind: str) -> float:
    """The request budget's books: what commands spent of `kind`."""
    text = httpx.get(f"{rig.bot.url}/metrics", timeout=10).text
    pattern = (
        rf'^rlbot_together_requests_spent_total{{(?=[^}}]*consumer="command")'
        rf'(?=[^}}]*kind="{kind}")[^}}]*}} ([0-9.e+]+)$'
    )
    found = re.search(pattern, text, re.M)
    return float(found.group(1)) if found else 0.0


def _text(message: dict[str, Any]) -> str:
    return str(message.get("text", "")) + str(message.get("blocks", ""))


@pytest.mark.backend_independent("the name is resolved from Together's list; nothing is stored")
def test_a_name_shows_its_session_from_one_list_read_booked_to_the_command(rig: Rig) -> None:
    rig.together.add(SID_A, display_name="grpo-gsm8k-main")
    rig.together.add(SID_B, display_name="ppo-math")
    lists_before = _spent(rig, "list_page")

    _, token = ask(rig, "grpo-gsm8k-main")
    card = rig.slack.wait_for_response(token)

    assert card["response_type"] == "in_channel"
    assert SID_A in _text(card) and SID_B not in _text(card)
    routes = [(route, path) for route, path in _routes(rig) if route in ("get", "list")]
    # tried as an id (the word could be one), then one read of the list: no second GET
    assert [route for route, _ in routes] == ["get", "list"], routes
    assert "status" not in routes[1][1]  # every status: a name of an ended session is found too
    assert _spent(rig, "list_page") == lists_before + 1


@pytest.mark.backend_independent("Together's list decides; nothing is stored")
def test_a_name_several_sessions_share_lists_them_with_a_button_that_runs_the_command(
    rig: Rig,
) -> None:
    rig.together.add(SID_A, display_name="twin", status="TRAINING_SESSION_STATUS_RUNNING")
    rig.together.add(SID_B, display_name="twin", status="TRAINING_SESSION_STATUS_STOPPED")
    rig.together.add(SID_C, display_name="other")
    channel = _channel()

    _, token = ask(rig, "subscribe twin checkpoints", channel_id=channel)
    listed = rig.slack.wait_for_response(token)

    assert listed["response_type"] == "ephemeral"
    assert "2 sessions are named `twin`" in _text(listed)
    assert SID_A in _text(listed) and SID_B in _text(listed) and SID_C not in _text(listed)
    buttons = {
        block["accessory"]["value"]: block["accessory"]["action_id"]
        for block in listed["blocks"]
        if "accessory" in block
    }
    assert set(buttons) == {f"subscribe {SID_A} checkpoints", f"subscribe {SID_B} checkpoints"}
    assert rig.query("SELECT count(*) FROM subscriptions") == [(0,)]  # nothing done yet

    click_token = uuid.uuid4().hex
    value = f"subscribe {SID_A} checkpoints"
    response = rig.bot.click(
        buttons[value],
        value,
        response_url=rig.slack.response_url(click_token),
        channel_id=channel,
        is_ephemeral=True,
    )
    assert response.status_code == 200
    answer = rig.slack.wait_for_response(click_token)
    assert "Subscribed" in _text(answer), answer
    stored = rig.query("SELECT session_id, channel_id, filters FROM subscriptions")
    assert [(s, c) for s, c, _ in stored] == [(SID_A, channel)]
    assert "checkpoints" in str(stored[0][2])


@pytest.mark.backend_independent("Together's list decides; nothing is stored")
def test_no_match_says_so_and_points_to_ls_all(rig: Rig) -> None:
    rig.together.add(SID_A, display_name="grpo-gsm8k-main")
    channel = _channel()
    for text in ("grpo-gsm8k-mian", "alert grpo-gsm8k-mian reward < 0.2", "chart no.such/run"):
        _, token = ask(rig, text, channel_id=channel)
        answer = rig.slack.wait_for_response(token)
        assert answer["response_type"] == "ephemeral"
        assert "No session named `" in _text(answer), (text, answer)
        assert "`/rl-session ls all` lists them" in _text(answer)
    assert rig.query("SELECT count(*) FROM metric_rules WHERE channel_id = :c", c=channel) == [(0,)]
    # a name that is not id-shaped never goes into a URL: only list reads for it
    assert not [path for _, path in _routes(rig) if "no.such" in path]


@pytest.mark.backend_independent("an id Together does not know, as before names")
def test_an_unknown_uuid_is_an_id_not_a_name(rig: Rig) -> None:
    _, token = ask(rig, UNKNOWN_UUID)
    answer = rig.slack.wait_for_response(token)
    assert "Together has no training session with that id" in _text(answer)
    assert [route for route, _ in _routes(rig)] == ["get"]  # no list read


def test_every_verb_that_takes_an_id_takes_the_name(rig: Rig) -> None:
    """subscribe, mute, unmute, alert, alerts, budget and unsubscribe by name all
    act on the session's id; once subscribed, its id is known and costs nothing."""
    rig.together.add(SID_A, display_name="grpo-main")
    rig.together.add(SID_B, display_name="ppo-math")
    channel = _channel()

    def say(text: str) -> str:
        _, token = ask(rig, text, channel_id=channel)
        return _text(rig.slack.wait_for_response(token))

    assert "Subscribed" in say("subscribe grpo-main")
    assert rig.query(
        "SELECT session_id FROM subscriptions WHERE channel_id = :c AND active", c=channel
    ) == [(SID_A,)]
    assert "muted this thread until" in say("mute grpo-main 2h")
    muted = "SELECT muted_until IS NOT NULL FROM subscriptions WHERE channel_id = :c"
    assert rig.query(muted, c=channel) == [(True,)]
    assert "unmuted this thread" in say("unmute grpo-main")
    assert rig.query(muted, c=channel) == [(False,)]
    say("alert grpo-main reward < 0.2")
    say("budget grpo-main $20")
    assert rig.query(
        "SELECT session_id, metric FROM metric_rules WHERE channel_id = :c", c=channel
    ) == [(SID_A, "reward")]
    assert rig.query("SELECT session_id FROM budgets WHERE channel_id = :c", c=channel) == [
        (SID_A,)
    ]
    assert "reward" in say("alerts grpo-main")
    # the id is known here: the command asks nothing of Together (the poller, which
    # now watches the session, may; the bot's books tell the two apart)
    spent = [_spent(rig, kind) for kind in ("get", "list_page")]
    assert "reward" in say(f"alerts {SID_A}")
    assert [_spent(rig, kind) for kind in ("get", "list_page")] == spent
    say("unsubscribe grpo-main")
    assert rig.query(
        "SELECT count(*) FROM subscriptions WHERE channel_id = :c AND active", c=channel
    ) == [(0,)]
    rig.query("DELETE FROM metric_rules WHERE channel_id = :c", c=channel)
    rig.query("DELETE FROM budgets WHERE channel_id = :c", c=channel)


# --- the words people see (issue's slips) -----------------------------------------------------


@pytest.mark.backend_independent("the ack's own words; nothing is stored")
def test_help_names_no_setting_stop_points_to_the_button_and_at_ben_to_the_picker(
    rig: Rig,
) -> None:
    helped, _ = ask(rig, "help")
    assert not SETTING.search(helped.text.replace("HH:MM", "")), helped.text
    assert "the time your operator set" in helped.text

    stopped, _ = ask(rig, f"stop {SID_A}")
    assert "Stop session" in stopped.text and "did not understand" not in stopped.text

    for text in ("ls running @ben", "follow @ben"):
        refused, _ = ask(rig, text)
        assert "pick the person from Slack's list" in refused.text, (text, refused.text)
    assert _routes(rig) == []  # all answered in the ack


@pytest.mark.backend_independent("App Home's view; nothing is stored")
def test_app_home_says_what_to_ask_the_operator_for_not_a_setting(rig: Rig) -> None:
    user = f"U{uuid.uuid4().hex[:8].upper()}"
    open_home(rig.bot, user=user)

    def view() -> list[dict[str, Any]]:
        return [
            c.params["view"]
            for c in rig.slack.successful("views.publish")
            if c.params.get("user_id") == user
        ]

    [published] = rig.slack.wait_for(view, message="views.publish")
    text = json.dumps(published, ensure_ascii=False)
    assert "ask your operator to pair your Together user id" in text
    assert not SETTING.search(text.replace("HH:MM", "")), text


@pytest.mark.backend_independent("Together's list decides; nothing is stored")
def test_a_name_with_slacks_escapes_is_echoed_as_typed_not_escaped_twice(rig: Rig) -> None:
    """Slack sends `&`, `<` and `>` as `&amp;`, `&lt;` and `&gt;`: the answer shows
    `a&<b>` once escaped for mrkdwn (`a&amp;&lt;b&gt;`), not `a&amp;amp;&amp;lt;b…`,
    which Slack shows as `a&amp;&lt;b&gt;`."""
    rig.together.add(SID_A, display_name="twin&<x>")
    rig.together.add(SID_B, display_name="twin&<x>")
    for text, said in (
        ("subscribe twin&amp;&lt;x&gt;", "2 sessions are named `twin&amp;&lt;x&gt;`"),
        ("nope&amp;&lt;x&gt;", "No session named `nope&amp;&lt;x&gt;`"),
    ):
        _, token = ask(rig, text)
        answer = rig.slack.wait_for_response(token)
        assert said in answer["blocks"][0]["text"]["text"], answer
        assert "&amp;amp;" not in _text(answer) and "&amp;lt;" not in _text(answer), answer
