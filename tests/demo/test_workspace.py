"""What the demo's Slack does with the bot's answers, as Slack would: a response_url
POST whispers, replaces, deletes or posts; chat.postEphemeral and App Home views
are kept for the page. Fast: the simulated Slack in-process, no bot."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from slack_sdk import WebClient

from bot.demo.workspace import DEMO_CHANNEL, GUEST, YOU, Asked, DemoSlack


@pytest.fixture
def slack() -> Iterator[DemoSlack]:
    with DemoSlack() as server:
        yield server


def answer(slack: DemoSlack, asked: Asked, **body: object) -> None:
    url = slack.new_response_url(asked)
    assert httpx.post(url, json=body, timeout=5).status_code == 200


def texts(slack: DemoSlack, viewer: str) -> list[str]:
    return [m["text"] for m in slack.conversation(DEMO_CHANNEL, viewer)]


def test_an_ephemeral_answer_is_seen_only_by_whoever_asked(slack: DemoSlack) -> None:
    answer(slack, Asked(DEMO_CHANNEL, YOU), text="just for you", response_type="ephemeral")
    assert texts(slack, YOU) == ["just for you"]
    assert texts(slack, GUEST) == []
    [mine] = slack.conversation(DEMO_CHANNEL, YOU)
    slack.dismiss(mine["ephemeral"], GUEST)
    assert texts(slack, YOU) == ["just for you"]
    slack.dismiss(mine["ephemeral"], YOU)
    assert texts(slack, YOU) == []


def test_replace_and_delete_original_act_on_the_clicked_message(slack: DemoSlack) -> None:
    answer(slack, Asked(DEMO_CHANNEL, YOU), text="page 1")
    [first] = slack.conversation(DEMO_CHANNEL, YOU)
    from_it = Asked(DEMO_CHANNEL, YOU, ephemeral=first["ephemeral"])
    answer(slack, from_it, text="page 2", replace_original=True)
    assert texts(slack, YOU) == ["page 2"]
    answer(slack, from_it, delete_original=True)
    assert texts(slack, YOU) == []
    posted = slack.add_message(DEMO_CHANNEL, "a card")
    on_card = Asked(DEMO_CHANNEL, YOU, message_ts=posted["ts"])
    answer(slack, on_card, text="a card, noted", replace_original=True)
    [card] = slack.conversation(DEMO_CHANNEL, GUEST)
    assert card["text"] == "a card, noted" and "edited" in card


def test_in_channel_answers_and_web_api_whispers_and_home_views(slack: DemoSlack) -> None:
    answer(slack, Asked(DEMO_CHANNEL, YOU), text="for everyone", response_type="in_channel")
    assert texts(slack, GUEST) == ["for everyone"]
    client = WebClient(base_url=slack.api_url, token="xoxb-demo")
    client.chat_postEphemeral(channel=DEMO_CHANNEL, user=GUEST, text="psst")
    assert texts(slack, GUEST) == ["for everyone", "psst"]
    assert texts(slack, YOU) == ["for everyone"]
    view = {"type": "home", "blocks": [{"type": "divider"}]}
    assert client.views_publish(user_id=YOU, view=json.dumps(view))["ok"]
    assert slack.home(YOU) == view
    assert slack.home(GUEST) is None
