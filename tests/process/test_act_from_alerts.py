"""Routing and acting from the alert, through one real `rl-bot serve` per backend
with the Slack- and Together-shaped servers: `broadcast=` and `dm=creator`
(a DM refused loses nothing else), Acknowledge by two people and a repage of
the alert nobody took, Keep alive allowed and refused, Download refused off
the Stop allowlist and answered only to the clicker (its links nowhere else: not in Slack's channels, the database
or the log), and the resource line of an unwatched card from one shared read.

The bot is shared by the module; the fakes and tables are reset before each test.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from bot.simulated.slack import FakeSlack, SlackCall
from bot.simulated.together import KEY_OWNER, make_session
from tests.support import wait_until
from tests.support.rig import Rig, shared_rig

pytestmark = pytest.mark.slow

OPS = "COPS"
MENTION = "<!subteam^S0ONCALL>"
rig = shared_rig(
    ONCALL_CHANNEL=OPS,
    ONCALL_MENTION=MENTION,
    STOP_ALLOWED_USER_IDS="UALLOWED",
    CREATED_BY_USER_MAP=f"{KEY_OWNER}=UDANA,user_blocked=UBLOCK",
    ONCALL_REPAGE_MINUTES="0.2",  # 12 s
    IDLE_RESOURCE_ALERT_MINUTES="0.05",  # 3 s
    TOGETHER_TIMEOUT_SECONDS="5",
)


@pytest.fixture(autouse=True)
def _fresh(rig: Rig) -> Iterator[None]:
    with rig.fresh():
        for table in ("alert_acks", "alerts_sent", "jobs"):
            rig.query(f"DELETE FROM {table}")
        with rig.together._lock:
            rig.together.resources.clear()
        rig.together.download_signatures.clear()
        yield


def sid(tag: str) -> str:
    """A fresh session id per test and backend (the fakes outlive a test)."""
    return f"{tag}{uuid.uuid4().hex[: 8 - len(tag)]}-e89b-12d3-a456-426614174000"


def ask(rig: Rig, text: str, *, channel: str = "C123", user: str = "U123") -> dict[str, Any]:
    token = uuid.uuid4().hex
    response = rig.bot.command(
        text, response_url=rig.slack.response_url(token), channel_id=channel, user_id=user
    )
    assert response.status_code == 200, response.text
    return rig.slack.wait_for_response(token)


def click(
    rig: Rig,
    action_id: str,
    value: str,
    *,
    channel: str,
    user: str,
    message: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A click whose answer (ephemeral, through response_url) comes back."""
    token = uuid.uuid4().hex
    response = rig.bot.click(
        action_id,
        value,
        response_url=rig.slack.response_url(token),
        channel_id=channel,
        user_id=user,
        is_ephemeral=message is None,
        message=message,
    )
    assert response.status_code == 200, response.text
    return rig.slack.wait_for_response(token)


def send_click(
    rig: Rig, action_id: str, value: str, *, channel: str, user: str, post: SlackCall
) -> None:
    """A click on a posted message that answers by redrawing it (no response expected)."""
    message = {"ts": post.ts, "text": post.text, "blocks": post.blocks}
    response = rig.bot.click(
        action_id,
        value,
        response_url=rig.slack.response_url(uuid.uuid4().hex),
        channel_id=channel,
        user_id=user,
        is_ephemeral=False,
        message=message,
    )
    assert response.status_code == 200, response.text


def said(answer: dict[str, Any]) -> str:
    return json.dumps(answer)


def subscribe(rig: Rig, session_id: str, options: str, channel: str) -> tuple[str, str]:
    """Subscribe `channel`; (its root card's ts, the answer's words)."""
    answer = said(ask(rig, f"subscribe {session_id} {options}", channel=channel))
    assert "Subscribed" in answer, answer
    root = next(
        c.ts
        for c in rig.slack.successful_posts(channel)
        if c.thread_ts is None and session_id in (c.text or "")
    )
    assert root is not None
    return root, answer


def button_of(post: SlackCall, action_id: str) -> dict[str, Any]:
    return next(
        e
        for b in post.blocks or []
        if b.get("type") == "actions"
        for e in b["elements"]
        if re.fullmatch(action_id, e["action_id"])
    )


def has_button(post: SlackCall, action_id: str) -> bool:
    try:
        button_of(post, action_id)
    except StopIteration:
        return False
    return True


def thread_posts(slack: FakeSlack, channel: str, root: str, words: str) -> list[SlackCall]:
    return [c for c in slack.posts_in_thread(channel, root) if words in (c.text or "")]


def broadcast(slack: FakeSlack, channel: str, ts: str | None) -> bool:
    return any(
        m["ts"] == ts and m.get("subtype") == "thread_broadcast" for m in slack.messages_in(channel)
    )


# --- routing ---------------------------------------------------------------------------------


def test_broadcast_modes_and_the_creators_dm_and_a_refused_dm_loses_nothing(rig: Rig) -> None:
    slack, together = rig.slack, rig.together
    s_err, s_ckpt, s_blocked = sid("a"), sid("b"), sid("c")
    together.add(s_err, "RUNNING")
    together.add(s_ckpt, "RUNNING", checkpoints=1)
    together.add(s_blocked, "RUNNING", created_by="user_blocked")
    root_ends, answer = subscribe(rig, s_err, "broadcast=ends dm=creator", "C1")
    assert "the session's end (and errors) also shown in the channel" in answer
    assert "DMs to the creator <@UDANA>" in answer
    root_plain, _ = subscribe(rig, s_err, "dm=creator", "C2")  # BROADCAST_ERRORS is off
    root_all, _ = subscribe(rig, s_ckpt, "checkpoints broadcast=all", "C3")
    root_blocked, _ = subscribe(rig, s_blocked, "dm=creator", "C4")
    slack.set_channel_error("UBLOCK", "cannot_dm_bot")  # the creator blocked the app

    together.set_status(s_err, "ERROR")
    together.set_status(s_blocked, "ERROR")
    together.put(make_session(s_ckpt, "RUNNING", checkpoints=2))  # one more of each kind

    ends = wait_until(lambda: thread_posts(slack, "C1", root_ends, "Error"), what="C1 error")
    plain = wait_until(lambda: thread_posts(slack, "C2", root_plain, "Error"), what="C2 error")
    news = wait_until(lambda: thread_posts(slack, "C3", root_all, "checkpoint"), what="C3 news")
    assert broadcast(slack, "C1", ends[0].ts)  # broadcast=ends: an error ends it
    assert not broadcast(slack, "C2", plain[0].ts)  # the default: BROADCAST_ERRORS=false
    assert broadcast(slack, "C3", news[0].ts)  # broadcast=all: every reply
    assert has_button(news[0], r"rl_download:\d+")

    dms = wait_until(lambda: slack.successful_posts("UDANA"), what="the creator's DM")
    wait_until(lambda: thread_posts(slack, "C4", root_blocked, "Error"), what="C4 error")
    refused = wait_until(
        lambda: (
            rig.query(
                "SELECT state, last_error FROM outbox WHERE kind = 'creator_dm' AND channel_id = 'UBLOCK'"
            )
            if rig.query("SELECT 1 FROM outbox WHERE channel_id = 'UBLOCK' AND state = 'dead'")
            else None
        ),
        what="the refused DM set aside",
    )
    assert refused == [("dead", "DM refused: cannot_dm_bot")]
    time.sleep(1.5)  # several delivery rounds: no second DM, no retry of the refused one
    dms = slack.successful_posts("UDANA")
    assert len(dms) == 1, [d.text for d in dms]
    text = (dms[0].text or "") + json.dumps(dms[0].blocks)
    assert f"grpo-{s_err[:8]}" in text and "About one of your training sessions" in text
    assert "https://example.slack.com/archives/C1/p" in text  # the thread it was told in
    assert len(slack.calls_to("chat.postMessage")) - len(slack.successful_posts()) == 1
    on_call = json.dumps([c.params for c in slack.successful_posts(OPS)])
    assert s_blocked in on_call and "set aside" not in on_call  # on-call still paged, not bothered


# --- Acknowledge and repage ------------------------------------------------------------------------


def test_acknowledge_by_two_people_and_the_alert_nobody_took_is_paged_once_more(
    rig: Rig,
) -> None:
    slack, together = rig.slack, rig.together
    taken, left = sid("d"), sid("e")
    for session_id in (taken, left):
        together.add(session_id, "RUNNING")
        subscribe(rig, session_id, "", "C5")
        together.set_status(session_id, "ERROR")

    def page(session_id: str) -> SlackCall | None:
        return next(
            (
                c
                for c in slack.successful_posts(OPS)
                if c.thread_ts is None and session_id in (c.text or "")
            ),
            None,
        )

    alert = wait_until(lambda: page(taken), what="the on-call alert")
    ack = button_of(alert, "rl_ack")
    send_click(rig, "rl_ack", ack["value"], channel=OPS, user="UDANA", post=alert)
    update = wait_until(lambda: slack.updates(OPS, alert.ts), what="the alert redrawn")
    note = json.dumps(update[-1].blocks)
    assert "<@UDANA> is on it since <!date^" in note
    assert json.dumps(alert.blocks)[:-1] in note  # the alert itself kept, the note added
    second = said(
        click(
            rig,
            "rl_ack",
            ack["value"],
            channel=OPS,
            user="UBOB",
            message={"ts": alert.ts, "text": alert.text, "blocks": alert.blocks},
        )
    )
    assert "<@UDANA> has this alert: on it since" in second
    again = said(
        click(
            rig,
            "rl_ack",
            ack["value"],
            channel=OPS,
            user="UDANA",
            message={"ts": alert.ts, "text": alert.text, "blocks": alert.blocks},
        )
    )
    assert "You took this alert at" in again
    assert len(slack.updates(OPS, alert.ts)) == 1  # later clicks redraw nothing
    assert [r[0] for r in rig.query("SELECT user_id FROM alert_acks")] == ["UDANA"]
    gone = said(click(rig, "rl_ack", "987654321", channel=OPS, user="UBOB"))
    assert "I no longer know that alert" in gone

    other = wait_until(lambda: page(left), what="the second alert")
    repage = wait_until(
        lambda: [
            c
            for c in slack.posts_in_thread(OPS, other.ts or "")
            if "Unacknowledged for" in (c.text or "")
        ],
        what="the repage",
        timeout=40,
    )
    assert repage[0].text is not None and repage[0].text.startswith(MENTION)
    assert broadcast(slack, OPS, repage[0].ts)  # a page: shown in the channel too
    time.sleep(2)
    assert (
        len(
            [
                c
                for c in slack.posts_in_thread(OPS, other.ts or "")
                if "Unacknowledged for" in (c.text or "")
            ]
        )
        == 1
    )
    assert not [
        c
        for c in slack.posts_in_thread(OPS, alert.ts or "")
        if "Unacknowledged for" in (c.text or "")
    ]


# --- Keep alive -----------------------------------------------------------------------------------


@pytest.mark.backend_independent("who may act, and Together's answers")
def test_keep_alive_from_an_idle_alert_allowed_refused_and_for_a_resource_gone(rig: Rig) -> None:
    slack, together = rig.slack, rig.together
    session_id = sid("f")
    together.add_resource("res-keep", "READY")
    together.add(session_id, "RUNNING", model_resources_id="res-keep")
    root, _ = subscribe(rig, session_id, "dm=creator", "C6")
    together.set_status(session_id, "STOPPED")  # the resource keeps billing
    alert = wait_until(
        lambda: next(iter(thread_posts(slack, "C6", root, "idle for")), None), what="idle alert"
    )
    keep = button_of(alert, "rl_keep_alive")
    assert keep["value"] == "res-keep" and keep["confirm"]["confirm"]["text"] == "Keep it up"
    page = wait_until(
        lambda: next(
            (c for c in slack.successful_posts(OPS) if "res-keep" in (c.text or "")), None
        ),
        what="the idle page",
    )
    assert has_button(page, "rl_ack") and has_button(page, "rl_keep_alive")
    dm = wait_until(lambda: slack.successful_posts("UDANA"), what="the creator's DM")
    assert has_button(dm[0], "rl_keep_alive") and not has_button(dm[0], "rl_ack")

    refused = said(click(rig, "rl_keep_alive", "res-keep", channel="C6", user="UBOB"))
    assert "not allowed to keep model resources up" in refused
    assert together.extend_requests == []

    send_click(rig, "rl_keep_alive", "res-keep", channel="C6", user="UALLOWED", post=alert)
    update = wait_until(lambda: slack.updates("C6", alert.ts), what="the alert redrawn")
    note = json.dumps(update[-1].blocks)
    assert "<@UALLOWED> kept model resource `res-keep` alive: it now stops if inactive at" in note
    assert together.extend_requests == [("res-keep", 3600)]

    together.set_resource("res-keep", "STOPPED")
    not_ready = said(click(rig, "rl_keep_alive", "res-keep", channel="C6", user="UALLOWED"))
    assert "Together did not keep the resource up: model resource is not ready" in not_ready
    gone = said(click(rig, "rl_keep_alive", "res-gone", channel="C6", user="UALLOWED"))
    assert "no such model resource any more" in gone
    assert together.extend_requests == [("res-keep", 3600)]


# --- the card: resource line and Download ------------------------------------------------------


@pytest.mark.backend_independent("the card's words and an ephemeral answer")
def test_an_unwatched_card_has_its_resource_line_and_download_answers_only_the_clicker(
    rig: Rig,
) -> None:
    slack, together = rig.slack, rig.together
    lora, full = sid("g"), sid("h")
    together.add(lora, "RUNNING", checkpoints=2)
    together.add(full, "RUNNING", lora_config=None)
    card = ask(rig, lora, channel="C7")
    line = next(
        b["text"]["text"] for b in card["blocks"] if b.get("block_id") == "rl_resource_line"
    )
    assert "Ready" in line and "H100-80GB ×2 (trainer + 1 generator replica)" in line
    assert "stops if inactive at <!date^" in line and "$25.00/h" in line
    resource_gets = [r for r in together.requests if r.route == "resource"]
    assert len(resource_gets) == 1
    ask(rig, lora, channel="C7")  # asked again: the read is shared, not repeated
    assert len([r for r in together.requests if r.route == "resource"]) == 1

    downloads = [
        e
        for b in card["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"].startswith("rl_download")
    ]
    assert len(downloads) == 2
    # Someone not on the Stop allowlist is told why; Together is not asked.
    refused_user = said(
        click(rig, downloads[0]["action_id"], downloads[0]["value"], channel="C7", user="U123")
    )
    assert "not allowed to download checkpoint weights" in refused_user
    assert together.download_requests == [] and together.download_signatures == []
    answer = click(
        rig, downloads[0]["action_id"], downloads[0]["value"], channel="C7", user="UALLOWED"
    )
    text = said(answer)
    assert answer.get("response_type") == "ephemeral"
    assert "adapter_model.safetensors" in text and "134.2 MB" in text and "LoRA adapter" in text
    signatures = list(together.download_signatures)
    assert len(signatures) == 2 and all(s in text for s in signatures)
    assert together.download_requests[-1][1] == "CHECKPOINT_VARIANT_ADAPTER"

    full_card = ask(rig, full, channel="C7")
    full_button = next(
        e
        for b in full_card["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"].startswith("rl_download")
    )
    merged = said(
        click(rig, full_button["action_id"], full_button["value"], channel="C7", user="UALLOWED")
    )
    assert (
        "merged model" in merged
        and together.download_requests[-1][1] == "CHECKPOINT_VARIANT_MERGED"
    )

    training_id = together.get(lora)["training_checkpoints"][0]["id"]  # type: ignore[index]
    before = len(together.download_requests)
    refused = said(
        click(rig, "rl_download:0", f"{lora}/{training_id}", channel="C7", user="UALLOWED")
    )
    assert "training checkpoint" in refused and "inference checkpoints be downloaded" in refused
    together.remove(lora)
    missing = said(
        click(rig, downloads[1]["action_id"], downloads[1]["value"], channel="C7", user="UALLOWED")
    )
    assert "no" in missing.lower() and len(together.download_requests) == before

    # The presigned links went to the clicker only: nowhere in Slack's channels,
    # the database or the log.
    every = list(together.download_signatures)
    channel_calls = json.dumps([c.params for c in slack.calls])
    stored = json.dumps(
        [
            rig.query(f"SELECT * FROM {table}")
            for table in ("outbox", "subscriptions", "watched_sessions", "alert_acks", "jobs")
        ],
        default=str,
    )
    log = rig.bot.log()
    for signature in every:
        assert signature not in channel_calls
        assert signature not in stored
        assert signature not in log
