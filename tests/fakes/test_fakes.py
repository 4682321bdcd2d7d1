"""The fakes themselves behave: real sockets, recording, faults, signing."""

from __future__ import annotations

import asyncio
import json
import time
from urllib.parse import parse_qs

import httpx
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.simulated import (
    FakeSlack,
    FakeTogether,
    block_action_body,
    post_signed,
    refusing_port,
    sign,
    slash_command_body,
)

KEY = "test-together-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


# -- Slack ---------------------------------------------------------------------------------------


async def test_post_message_unique_ts_and_replies_show_metadata(slack: FakeSlack) -> None:
    meta = {"event_type": "rl_session", "event_payload": {"session_id": "s1"}}
    async with httpx.AsyncClient(base_url=slack.api_url) as http:
        headers = {"Authorization": "Bearer xoxb-test"}
        root = (
            await http.post(
                "chat.postMessage",
                json={"channel": "C1", "text": "root", "metadata": meta},
                headers=headers,
            )
        ).json()
        # form-encoded, with metadata as a JSON string
        reply = (
            await http.post(
                "chat.postMessage",
                data={
                    "channel": "C1",
                    "text": "reply",
                    "thread_ts": root["ts"],
                    "metadata": json.dumps(meta),
                },
                headers=headers,
            )
        ).json()
        assert root["ok"] and reply["ok"]
        assert root["ts"] != reply["ts"]
        assert reply["message"]["thread_ts"] == root["ts"]
        replies = (
            await http.post(
                "conversations.replies",
                data={"channel": "C1", "ts": root["ts"], "include_all_metadata": "true"},
                headers=headers,
            )
        ).json()
    assert [m["text"] for m in replies["messages"]] == ["root", "reply"]
    assert all(m["metadata"] == meta for m in replies["messages"])
    assert [c.params["text"] for c in slack.posts_in_thread("C1", root["ts"])] == ["reply"]
    assert slack.calls_to("chat.postMessage")[0].token == "xoxb-test"
    assert len(slack.successful_posts("C1")) == 2


async def test_fail_next_429_carries_retry_after_and_counts_as_failed(slack: FakeSlack) -> None:
    slack.fail_next("chat.postMessage", status=429, retry_after=7)
    async with httpx.AsyncClient(base_url=slack.api_url) as http:
        first = await http.post("chat.postMessage", json={"channel": "C1", "text": "a"})
        second = await http.post("chat.postMessage", json={"channel": "C1", "text": "b"})
    assert first.status_code == 429
    assert first.headers["Retry-After"] == "7"
    assert first.json() == {"ok": False, "error": "ratelimited"}
    assert second.status_code == 200 and second.json()["ok"]
    assert [c.ok for c in slack.calls_to("chat.postMessage")] == [False, True]
    assert [c.text for c in slack.successful_posts()] == ["b"]


async def test_channel_error_and_strict_update(slack: FakeSlack) -> None:
    slack.set_channel_error("C9", "is_archived")
    slack.strict_update = True
    client = AsyncWebClient(base_url=slack.api_url, token="xoxb-test")
    with pytest.raises(SlackApiError) as err:
        await client.chat_postMessage(channel="C9", text="x")
    assert err.value.response["error"] == "is_archived"
    with pytest.raises(SlackApiError) as err:
        await client.chat_update(channel="C1", ts="1.000001", text="x")
    assert err.value.response["error"] == "message_not_found"
    slack.clear_channel_error("C9")
    assert (await client.chat_postMessage(channel="C9", text="x"))["ok"]
    assert len(slack.successful_posts("C9")) == 1


async def test_slack_sdk_client_against_fake(slack: FakeSlack) -> None:
    client = AsyncWebClient(base_url=slack.api_url, token="xoxb-test")
    auth = await client.auth_test()
    assert auth["user_id"] == "UBOT"
    meta = {"event_type": "rl_session", "event_payload": {"session_id": "s1", "n": 1}}
    root = await client.chat_postMessage(channel="C1", text="root", metadata=meta)
    await client.chat_postMessage(channel="C1", text="r1", thread_ts=root["ts"], metadata=meta)
    replies = await client.conversations_replies(
        channel="C1", ts=root["ts"], include_all_metadata=True
    )
    assert [m["text"] for m in replies["messages"]] == ["root", "r1"]
    assert replies["messages"][1]["metadata"] == meta
    history = await client.conversations_history(channel="C1", include_all_metadata=True)
    assert [m["text"] for m in history["messages"]] == ["root"]
    link = await client.chat_getPermalink(channel="C1", message_ts=root["ts"])
    assert link["permalink"].endswith("/archives/C1/p" + root["ts"].replace(".", ""))
    upd = await client.chat_update(channel="C1", ts=root["ts"], text="edited")
    assert upd["ok"] and slack.thread("C1", root["ts"])[0]["text"] == "edited"


CHART = {
    "type": "data_visualization",
    "title": "reward by step",
    "chart": {
        "type": "line",
        "series": [
            {"name": "reward", "data": [{"label": "0", "value": 0.1}, {"label": "9", "value": 0.4}]}
        ],
        "axis_config": {"categories": ["0", "9"], "x_label": "step", "y_label": "reward"},
    },
}


async def test_a_chart_block_is_taken_when_valid_and_refused_otherwise(slack: FakeSlack) -> None:
    client = AsyncWebClient(base_url=slack.api_url, token="xoxb-test")
    card = [{"type": "section", "text": {"type": "mrkdwn", "text": "card"}}, CHART]
    root = await client.chat_postMessage(channel="C1", text="card", blocks=card)
    assert slack.thread("C1", root["ts"])[0]["blocks"] == card
    long_title = [{**CHART, "title": "t" * 51}]
    with pytest.raises(SlackApiError) as refused:
        await client.chat_update(channel="C1", ts=root["ts"], text="card", blocks=long_title)
    assert refused.value.response["error"] == "invalid_blocks"
    assert "title: 51 characters" in refused.value.response["response_metadata"]["messages"][0]
    three = [CHART, CHART, CHART]
    with pytest.raises(SlackApiError):
        await client.chat_postMessage(channel="C1", text="card", blocks=three)
    slack.refuse_charts = True  # a workspace without the block
    with pytest.raises(SlackApiError) as older:
        await client.chat_update(channel="C1", ts=root["ts"], text="card", blocks=card)
    assert older.value.response["error"] == "invalid_blocks"
    await client.chat_update(channel="C1", ts=root["ts"], text="plain", blocks=card[:1])
    assert slack.thread("C1", root["ts"])[0]["blocks"] == card[:1]


async def test_response_url_and_expiry(slack: FakeSlack) -> None:
    webhook = AsyncWebhookClient(slack.response_url("tok1"))
    resp = await webhook.send(text="hello", response_type="ephemeral")
    assert resp.status_code == 200
    got = await slack.wait_for_response_async("tok1", timeout=2)
    assert got["text"] == "hello"
    slack.expire_response_url("tok1")
    resp = await AsyncWebhookClient(slack.response_url("tok1")).send(text="late")
    assert resp.status_code == 404
    assert len(slack.responses["tok1"]) == 1


def test_wait_for_times_out_with_dump(slack: FakeSlack) -> None:
    httpx.post(slack.api_url + "chat.postMessage", json={"channel": "C1", "text": "hi"})
    assert slack.wait_for(lambda s: s.successful_posts("C1"), timeout=1)
    with pytest.raises(AssertionError, match=r"chat\.postMessage \[ok\]"):
        slack.wait_for(lambda s: len(s.calls) > 5, timeout=0.2)


# -- Together ------------------------------------------------------------------------------------


def test_together_get_and_404_shape(together: FakeTogether) -> None:
    together.add("sess-1")
    ok = httpx.get(f"{together.base_url}/rl/training-sessions/sess-1", headers=AUTH)
    assert ok.status_code == 200
    assert ok.json()["status"] == "TRAINING_SESSION_STATUS_RUNNING"
    assert ok.json()["base_model"] == "Qwen/Qwen3.5-4B"
    missing = httpx.get(f"{together.base_url}/rl/training-sessions/nope", headers=AUTH)
    assert missing.status_code == 404
    assert missing.json() == {
        "error": {
            "message": "Training session not found",
            "type": "invalid_request_error",
            "param": None,
            "code": "not_found",
        }
    }
    assert together.requests_for("sess-1") == 1
    assert together.requests_for("nope") == 1
    assert together.total_requests == 2
    assert together.auth_headers == [f"Bearer {KEY}"] * 2


def test_together_bad_key_is_401(together: FakeTogether) -> None:
    together.add("sess-1")
    url = f"{together.base_url}/rl/training-sessions/sess-1"
    bad = httpx.get(url, headers={"Authorization": "Bearer wrong"})
    assert bad.status_code == 401
    assert bad.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(url).status_code == 401


def test_together_key_check_is_kept_apart_from_the_counts(together: FakeTogether) -> None:
    """The bot's start-up check of its key: answered as the list it is, recorded in
    `key_checks` only, and faulted only by a fault scripted for it."""
    url = f"{together.base_url}/rl/training-sessions?limit=1"
    together.fail(None, status=500)  # every other request
    assert httpx.get(url, headers=AUTH).json()["data"] == []
    assert httpx.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
    together.fail(None, status=503, route="key_check", times=1)
    assert httpx.get(url, headers=AUTH).status_code == 503
    assert [r.route for r in together.key_checks] == ["key_check"] * 3
    assert together.total_requests == 0 and together.paths == []
    assert httpx.get(f"{together.base_url}/rl/training-sessions?limit=2").status_code == 500


def test_together_old_shape_stop_and_list(together: FakeTogether) -> None:
    old = together.add("old-1", "RUNNING", new_shape=False)
    assert "display_name" not in old and "base_model" not in old
    assert "model_name" in old["inference_checkpoints"][0]["registration"]
    together.add("new-1", step="17")
    stopped = httpx.post(f"{together.base_url}/rl/training-sessions/new-1/stop", headers=AUTH)
    assert stopped.json()["status"] == "TRAINING_SESSION_STATUS_STOPPING"
    assert together.stop_requests == ["new-1"]
    page = httpx.get(f"{together.base_url}/rl/training-sessions?limit=1", headers=AUTH).json()
    assert [s["id"] for s in page["data"]] == ["old-1"] and page["meta"]["has_more"]
    page2 = httpx.get(
        f"{together.base_url}/rl/training-sessions",
        params={"limit": 1, "after": page["meta"]["next_cursor"]},
        headers=AUTH,
    ).json()
    assert [s["id"] for s in page2["data"]] == ["new-1"] and not page2["meta"]["has_more"]
    running = httpx.get(
        f"{together.base_url}/rl/training-sessions", params={"status": "RUNNING"}, headers=AUTH
    ).json()
    assert [s["id"] for s in running["data"]] == ["old-1"]


def test_set_status_bumps_updated_at(together: FakeTogether) -> None:
    before = together.add("s")
    after = together.set_status("s", "ERROR")
    assert after["status"] == "TRAINING_SESSION_STATUS_ERROR"
    assert after["updated_at"] > before["updated_at"]
    assert after["error"]["message"]


async def test_latency_is_honoured(together: FakeTogether) -> None:
    together.add("s")
    together.latency = 0.2
    async with httpx.AsyncClient(headers=AUTH) as http:
        started = time.monotonic()
        responses = await asyncio.gather(
            *(http.get(f"{together.base_url}/rl/training-sessions/s") for _ in range(8))
        )
        elapsed = time.monotonic() - started
    assert all(r.status_code == 200 for r in responses)
    assert elapsed >= 0.2
    assert together.max_in_flight >= 2  # concurrent, not serialized (no wall-clock bound: load)


def test_fault_times_counts_down(together: FakeTogether) -> None:
    together.add("s")
    url = f"{together.base_url}/rl/training-sessions/s"
    fault = together.fail("s", status=503, times=2)
    together.fail(None, status=429, headers={"Retry-After": "3"}, times=1)
    codes = [httpx.get(url, headers=AUTH).status_code for _ in range(4)]
    assert codes == [503, 503, 429, 200]
    assert fault.hits == 2
    together.fail("s", body="<html>bad gateway</html>", status=502, content_type="text/html")
    html = httpx.get(url, headers=AUTH)
    assert html.status_code == 502 and html.headers["content-type"] == "text/html"
    together.clear_faults()
    together.fail("s", body="[1,2]")
    assert httpx.get(url, headers=AUTH).json() == [1, 2]
    together.clear_faults()
    assert httpx.get(url, headers=AUTH).status_code == 200


def test_fault_delay_exceeds_client_timeout_and_disconnect(together: FakeTogether) -> None:
    together.add("s")
    url = f"{together.base_url}/rl/training-sessions/s"
    together.fail("s", delay=2.0, times=1)
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(url, headers=AUTH, timeout=0.2)
    together.fail("s", disconnect=True, times=1)
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(url, headers=AUTH)
    assert httpx.get(url, headers=AUTH).status_code == 200


def test_a_refusing_port_refuses_connections() -> None:
    with refusing_port() as port, pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/v1/rl/training-sessions/x", timeout=2)


def test_keep_alive_reuses_connection(together: FakeTogether) -> None:
    together.add("s")
    with httpx.Client(headers=AUTH) as http:
        for _ in range(20):
            assert http.get(f"{together.base_url}/rl/training-sessions/s").status_code == 200
    assert together.requests_for("s") == 20
    together.stop()  # with the keep-alive connection closed, stop must be quick
    assert not together.running


# -- signing -------------------------------------------------------------------------------------

SLACK_DOC_BODY = (
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow"
    "&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner"
    "&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands"
    "%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)


def test_sign_reproduces_slack_docs_example() -> None:
    headers = sign("8f742231b10e8888abcd99yyyzzz85a5", SLACK_DOC_BODY, timestamp=1531420618)
    assert headers["X-Slack-Request-Timestamp"] == "1531420618"
    assert (
        headers["X-Slack-Signature"]
        == "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    )
    assert sign("8f742231b10e8888abcd99yyyzzz85a5", SLACK_DOC_BODY.encode(), 1531420618) == headers


def test_bodies_are_slack_shaped() -> None:
    cmd = parse_qs(slash_command_body("status abc", response_url="http://x/response/1"))
    assert cmd["command"] == ["/rl-session"] and cmd["text"] == ["status abc"]
    body = block_action_body(
        "stop_session", "abc", response_url="http://x/response/2", message_ts="1.000001"
    )
    payload = json.loads(parse_qs(body)["payload"][0])
    assert payload["type"] == "block_actions"
    assert payload["actions"][0]["action_id"] == "stop_session"
    assert payload["container"]["message_ts"] == "1.000001"
    assert payload["message"]["ts"] == "1.000001"
    eph = block_action_body(
        "stop_session", "abc", response_url="http://x/r", message_ts="2.0", is_ephemeral=True
    )
    assert "message" not in json.loads(parse_qs(eph)["payload"][0])


async def test_post_signed_verifies_with_slack_sdk(slack: FakeSlack) -> None:
    body = slash_command_body("status s1", response_url=slack.response_url("r"))
    async with httpx.AsyncClient() as http:
        resp = await post_signed(http, slack.api_url + "signed.check", body, "shh")
    assert resp.status_code == 200
    (call,) = await slack.wait_for_calls_async("signed.check", timeout=2)
    assert call.params["text"] == "status s1"
    verifier = SignatureVerifier("shh")
    assert verifier.is_valid_request(body, dict(call.headers))
    assert not SignatureVerifier("other").is_valid_request(body, dict(call.headers))
