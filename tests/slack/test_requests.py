"""Reading a request from Slack's payload, and the checks that refuse a bad one:
pure rules, tested without a process (the I/O parts of a Request stay unset)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.commands.asker import Asker
from bot.slack.listeners.actions import card_problem
from bot.slack.listeners.home import subscription_problem
from bot.slack.listeners.request import Request
from bot.together.errors import USER_MESSAGES

SID = "123e4567-e89b-12d3-a456-426614174000"
NO_IO: dict[str, Any] = {"rt": None, "client": None, "respond": None}


def click(body: dict[str, Any], *, names_session: bool = True) -> Request:
    return Request.of_click(body, "a_button", names_session=names_session, **NO_IO)


def card_click(**over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": "U1", "team_id": "T9"},
        "team": {"id": "T1"},
        "channel": {"id": "C1"},
        "container": {"type": "message", "message_ts": "111.222", "is_ephemeral": False},
        "message": {"blocks": []},
        "actions": [{"action_id": "rl_refresh", "value": SID}],
    }
    body.update(over)
    return body


def test_a_click_names_who_where_and_what() -> None:
    req = click(card_click())
    assert (req.kind, req.verb) == ("button", "a_button")
    assert req.asker == Asker("T1", "C1", "U1")
    assert req.session_id == SID and req.value == SID
    assert req.message_ts == "111.222"
    assert not req.on_root_card


def test_the_team_falls_back_to_the_users_team() -> None:
    assert click(card_click(team=None)).team_id == "T9"


def test_an_ephemeral_card_has_no_message_to_adopt() -> None:
    body = card_click(container={"message_ts": "111.222", "is_ephemeral": True})
    assert click(body).message_ts is None


def test_a_root_card_is_one_that_offers_unsubscribe() -> None:
    blocks = [{"type": "actions", "elements": [{"action_id": "rl_unsubscribe", "value": SID}]}]
    assert click(card_click(message={"blocks": blocks})).on_root_card


def test_a_value_that_does_not_name_a_session_is_kept_apart() -> None:
    req = click(card_click(actions=[{"value": "42"}]), names_session=False)
    assert req.value == "42" and req.session_id == ""


@pytest.mark.parametrize(
    "over",
    [
        {"actions": None},
        {"actions": []},
        {"actions": ["not an object"]},
        {"channel": "C1"},
        {"user": None, "team": None},
        {"container": None, "message": None},
        {"message": {"blocks": [None, {"elements": [None, "x"]}]}},
    ],
)
def test_odd_payloads_are_read_as_empty_never_raise(over: dict[str, Any]) -> None:
    req = click(card_click(**over))
    assert isinstance(req.channel_id, str) and isinstance(req.session_id, str)


def test_a_command_names_who_where_and_its_session() -> None:
    body = {"team_id": "T1", "channel_id": "C1", "user_id": "U1", "text": f"show {SID}"}
    req = Request.of_command(body, "show", SID, **NO_IO)
    assert (req.kind, req.verb, req.session_id) == ("command", "show", SID)
    assert req.asker == Asker("T1", "C1", "U1")
    assert req.message_ts is None


# --- the checks ------------------------------------------------------------------------------


def test_a_card_button_must_name_a_session() -> None:
    assert card_problem(click(card_click())) is None
    for bad in ("", "../x", "<!channel>", "a b"):
        req = click(card_click(actions=[{"value": bad}]))
        assert card_problem(req) == USER_MESSAGES["invalid_id"]


def test_a_card_button_must_come_from_a_channel_and_a_user() -> None:
    for over in ({"channel": None}, {"user": {"team_id": "T1"}}):
        problem = card_problem(click(card_click(**over)))
        assert problem is not None and "where that click came from" in problem


@pytest.mark.parametrize(
    ("value", "user", "fine"),
    [
        ("17", "U1", True),
        ("9" * 18, "U1", True),
        ("9" * 19, "U1", False),
        ("1; DROP TABLE subscriptions", "U1", False),
        ("²", "U1", False),  # a digit to str.isdigit, not to int()
        ("-1", "U1", False),
        ("", "U1", False),
        ("17", "", False),
    ],
)
def test_home_unsubscribe_must_name_a_subscription(value: str, user: str, fine: bool) -> None:
    body = {"user": {"id": user}, "actions": [{"value": value}]}
    req = click(body, names_session=False)
    assert (subscription_problem(req) is None) is fine
