"""What is running: `/rl-session ls` through a real `rl-bot serve`,
signed Slack requests and the Together- and Slack-shaped servers."""

from __future__ import annotations

import itertools
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.block_kit import block_kit_problems
from tests.support import BotFactory, BotProcess, query, wait_until

pytestmark = pytest.mark.backend_independent(
    "ls reads Together's pages; the watched rows it marks are plain queries tested on both"
)
_tokens = itertools.count()


def ask(bot: BotProcess, slack: FakeSlack, text: str, *, user: str = "U123") -> dict[str, Any]:
    token = f"ls{next(_tokens)}"
    r = bot.command(text, response_url=slack.response_url(token), user_id=user)
    assert r.status_code == 200, r.text
    if r.content.strip():
        answer: dict[str, Any] = r.json()
        return answer
    return slack.wait_for_response(token)


def click(bot: BotProcess, slack: FakeSlack, action: str, value: str, **kw: Any) -> dict[str, Any]:
    token = f"ls{next(_tokens)}"
    r = bot.click(action, value, response_url=slack.response_url(token), **kw)
    assert r.status_code == 200, r.text
    return slack.wait_for_response(token)


def buttons(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        e["action_id"]: e
        for block in message.get("blocks") or []
        if block.get("type") == "actions"
        for e in block["elements"]
    }


def row_ids(message: dict[str, Any]) -> list[str]:
    return [b["value"] for k, b in buttons(message).items() if k.startswith("rl_subscribe.")]


def session_lists(together: FakeTogether) -> list[dict[str, list[str]]]:
    return [
        parse_qs(urlsplit(p).query)
        for p in together.paths
        if urlsplit(p).path.endswith("/rl/training-sessions")
    ]


def test_ls_pages_250_sessions_in_three_pages_only_to_the_caller(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    ids = [f"{i:08d}-e89b-12d3-a456-426614174000" for i in range(250)]
    for sid in ids:
        together.add(sid, "RUNNING")
    together.add("e0000000-e89b-12d3-a456-426614174000", "ERROR")
    bot = start_bot()
    pages = [ask(bot, slack, "ls")]
    while "rl_ls_more" in buttons(pages[-1]):
        pages.append(click(bot, slack, "rl_ls_more", buttons(pages[-1])["rl_ls_more"]["value"]))
        assert len(pages) <= 3
    assert len(pages) == 3
    assert [row_ids(p) for p in pages] == [ids[:100], ids[100:200], ids[200:]]
    for page in pages:
        assert block_kit_problems(page) == []
        assert page.get("response_type", "ephemeral") == "ephemeral"
        assert not page.get("replace_original")
    text = json.dumps(pages[-1], ensure_ascii=False)
    assert "201. " in text and "step 42" in text
    lists = session_lists(together)
    assert len(lists) == 3
    assert all(q["status[]"] == ["TRAINING_SESSION_STATUS_RUNNING"] for q in lists)
    assert "after" not in lists[0] and lists[1]["after"] == [ids[99]]
    assert slack.successful_posts("C123") == []  # nothing in the channel


def test_ls_filters_mine_user_model_and_status(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    together.add("a0000000-e89b-12d3-a456-426614174000", "RUNNING", created_by="user_ana")
    together.add("b0000000-e89b-12d3-a456-426614174000", "RUNNING", created_by="user_bob")
    together.add(
        "c0000000-e89b-12d3-a456-426614174000",
        "ERROR",
        created_by="user_bob",
        base_model="meta/Llama-3-8B",
    )
    bot = start_bot(CREATED_BY_USER_MAP="user_ana=U123,user_bob=U456")
    mine = ask(bot, slack, "ls mine")
    assert row_ids(mine) == ["a0000000-e89b-12d3-a456-426614174000"]
    assert session_lists(together)[-1]["created_by"] == ["user_ana"]
    bobs = ask(bot, slack, "ls all <@U456|bob>")
    assert row_ids(bobs) == [
        "b0000000-e89b-12d3-a456-426614174000",
        "c0000000-e89b-12d3-a456-426614174000",
    ]
    llama = ask(bot, slack, "ls error model=meta/Llama-3-8B")
    assert row_ids(llama) == ["c0000000-e89b-12d3-a456-426614174000"]
    assert "rl_stop.1" not in buttons(llama)  # nothing to stop in ERROR
    unmapped = json.dumps(ask(bot, slack, "ls mine", user="U999"))
    assert "Ask your operator" in unmapped and "Slack member ID `U999`" in unmapped
    bad = json.dumps(ask(bot, slack, "ls stopped"))
    assert "ls [running|creating|error|all]" in bad


def test_ls_row_buttons_subscribe_and_stop_behind_the_allowlist(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    sid = "d0000000-e89b-12d3-a456-426614174000"
    together.add(sid, "RUNNING")
    bot = start_bot(STOP_ALLOWED_USER_IDS="U123")
    page = ask(bot, slack, "ls")
    found = buttons(page)
    assert found["rl_subscribe.1"]["value"] == sid and "confirm" in found["rl_stop.1"]
    refused = click(bot, slack, "rl_stop.1", sid, user_id="U999")
    assert "not allowed" in json.dumps(refused)
    assert together.stop_requests == []
    for bad in ("../x", ""):
        assert "not a session id" in json.dumps(click(bot, slack, "rl_stop.1", bad))
    click(bot, slack, "rl_stop.1", sid)
    assert together.stop_requests == [sid]
    click(bot, slack, "rl_subscribe.1", sid)
    roots = [c for c in slack.successful_posts("C123") if c.thread_ts is None]
    assert any(sid in json.dumps(c.blocks) for c in roots)


def test_ls_flags_a_watched_session_that_stalled(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    sid = "f0000000-e89b-12d3-a456-426614174000"
    together.add(sid, "RUNNING", step="77")
    together.add("f1000000-e89b-12d3-a456-426614174000", "RUNNING", step="5")
    bot = start_bot(STALL_AFTER_MINUTES="0.05")
    token = "ls-sub"
    bot.command(f"subscribe {sid}", response_url=slack.response_url(token))
    assert "Subscribed" in json.dumps(slack.wait_for_response(token))
    root = next(c.ts for c in slack.successful_posts("C123") if c.thread_ts is None)
    wait_until(
        lambda: any(c.thread_ts == root for c in slack.successful_posts("C123")),
        what="the stall told",
    )
    page = json.dumps(ask(bot, slack, "ls"), ensure_ascii=False)
    first, second = page.split("*2.*")
    assert "stalled" in first and "step 77" in first
    assert "stalled" not in second  # not watched: the bot knows nothing of its progress


def test_ls_rows_show_resource_state_and_an_idle_resource_the_bot_follows(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    done = "a1000000-e89b-12d3-a456-426614174000"
    queued = "a2000000-e89b-12d3-a456-426614174000"
    together.add_resource("res-left", "READY")
    together.add_resource("res-queued", "PENDING")
    together.add(done, "RUNNING", model_resources_id="res-left")
    together.add(queued, "CREATING", model_resources_id="res-queued")
    bot = start_bot(IDLE_RESOURCE_ALERT_MINUTES="30")  # found idle, not yet alerted
    token = "ls-idle-sub"
    bot.command(f"subscribe {done}", response_url=slack.response_url(token))
    assert "Subscribed" in json.dumps(slack.wait_for_response(token))
    together.set_status(done, "STOPPED")  # its resource is left ready, and billing
    wait_until(
        lambda: "idle_since" in str(query(db_url, "SELECT progress FROM watched_sessions")),
        what="the subscribed-idle watch",
    )
    before = len(together.paths)
    page = ask(bot, slack, "ls all")
    assert block_kit_problems(page) == []
    first, second = json.dumps(page, ensure_ascii=False).split("*2.*")
    assert "Ready (billing)" in first and "idle resource" in first, first
    assert "Pending (waiting for GPUs)" in second and "idle resource" not in second
    sent = together.paths[before:]
    assert not [p for p in sent if "/model-resources/" in p]  # no request per row
    assert sum("/model-resources?" in p for p in sent) == 1
