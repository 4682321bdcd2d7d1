"""The Slack-shaped server's rate limits, as Slack answers them: HTTP 429
`ratelimited` with `Retry-After`, for `chat.update` past 50 in a rolling minute
of a workspace and `chat.postMessage` past a burst, then one a second, in one
channel."""

from __future__ import annotations

import time

import httpx

from bot.simulated import FakeSlack
from bot.simulated.slack_limits import SlackLimits


def _call(fake: FakeSlack, method: str, **params: str) -> httpx.Response:
    return httpx.post(
        fake.api_url + method, json=params, headers={"Authorization": "Bearer xoxb-1"}
    )


def test_chat_update_past_fifty_a_minute_is_refused_with_retry_after() -> None:
    with FakeSlack() as fake:
        for _ in range(50):
            assert _call(fake, "chat.update", channel="C1", ts="1.1", text="x").json()["ok"]
        refused = _call(fake, "chat.update", channel="C2", ts="1.2", text="x")
        assert refused.status_code == 429
        assert refused.json() == {"ok": False, "error": "ratelimited"}
        assert 1 <= int(refused.headers["Retry-After"]) <= 60  # when the oldest leaves
        assert [c.status for c in fake.calls_to("chat.update")][-1] == 429


def test_posts_to_one_channel_burst_then_go_one_a_second() -> None:
    with FakeSlack() as fake:
        fake.limits.posts_per_second = 0.05  # a slow machine's calls refill nothing meanwhile
        answers = [_call(fake, "chat.postMessage", channel="C1", text="x") for _ in range(6)]
        assert [a.status_code for a in answers] == [200] * 5 + [429]
        assert answers[-1].json()["error"] == "ratelimited"
        assert 1 <= int(answers[-1].headers["Retry-After"]) <= 20
        assert _call(fake, "chat.postMessage", channel="C2", text="x").status_code == 200
        fake.limits.posts_per_second = 1.0
        time.sleep(1.05)
        assert _call(fake, "chat.postMessage", channel="C1", text="x").status_code == 200


def test_the_limits_are_switched_off_and_back_on_by_reset() -> None:
    with FakeSlack(rate_limits=False) as fake:
        for _ in range(60):
            assert _call(fake, "chat.update", channel="C1", ts="1.1", text="x").status_code == 200
    with FakeSlack() as fake:
        fake.limits.enabled = False
        fake.reset()
        assert fake.limits.enabled


def test_a_minute_later_the_updates_are_taken_again() -> None:
    limits = SlackLimits(updates_per_minute=2)
    assert limits.take("chat.update", workspace="T", channel="C") is None
    assert limits.take("chat.update", workspace="T", channel="C") is None
    assert limits.take("chat.update", workspace="T", channel="C") is not None
    assert limits.take("chat.update", workspace="U", channel="C") is None  # per workspace
    limits._updates["T"] = type(limits._updates["T"])(t - 61 for t in limits._updates["T"])
    assert limits.take("chat.update", workspace="T", channel="C") is None
