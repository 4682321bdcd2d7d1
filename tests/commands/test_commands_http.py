"""Commands through HTTP: signed `/rl-session` requests against one real
`rl-bot serve` per backend, answered through response_url on the fake Slack,
with the card fetched from the fake Together.

The bot is shared by the module (it only answers commands here); the fakes are
reset before every test.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.rig import Rig, ask, shared_rig

pytestmark = pytest.mark.backend_independent(
    "cards, usage and Together's errors as Slack sees them; the database only stores"
)

SID_NEW = "123e4567-e89b-12d3-a456-426614174000"
SID_OLD = "0a1b2c3d-0000-4000-8000-00000000000a"

STATUSES = {
    "TRAINING_SESSION_STATUS_CREATING": "Creating",
    "TRAINING_SESSION_STATUS_RUNNING": "Running",
    "TRAINING_SESSION_STATUS_STOPPING": "Stopping",
    "TRAINING_SESSION_STATUS_STOPPED": "Stopped",
    "TRAINING_SESSION_STATUS_ERROR": "Error",
    "TRAINING_SESSION_STATUS_EXPIRED": "Expired",
    "TRAINING_SESSION_STATUS_UNSPECIFIED": "Unspecified",
    "TRAINING_SESSION_STATUS_PAUSED": "Paused",
}


# Together answering in 2 s must not hit the client timeout (base_env has 2 s).
rig = shared_rig(TOGETHER_TIMEOUT_SECONDS="5")


@pytest.fixture(autouse=True)
def _fresh(rig: Rig) -> Iterator[None]:
    with rig.fresh():
        yield


def buttons(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        element["action_id"]: element
        for block in message.get("blocks") or []
        if block.get("type") == "actions"
        for element in block["elements"]
    }


def status_field(message: dict[str, Any]) -> str:
    for block in message["blocks"]:
        for field in block.get("fields") or []:
            if field["text"].startswith("*Status*"):
                return str(field["text"])
    raise AssertionError(f"no Status field in {message}")


# --- the card --------------------------------------------------------------------------------


def test_card_for_both_api_shapes_arrives_in_channel(rig: Rig) -> None:
    slack, together = rig.slack, rig.together
    together.add(SID_NEW, new_shape=True)
    together.add(SID_OLD, new_shape=False)
    ack_new, new_token = ask(rig, SID_NEW)
    ack_old, old_token = ask(rig, f"show {SID_OLD}")
    # Ack first, empty: the card itself goes through response_url.
    assert ack_new.content == b"" and ack_old.content == b""

    new = slack.wait_for_response(new_token)
    assert new["response_type"] == "in_channel"
    assert new["text"].strip()
    blob = json.dumps(new)
    assert new["blocks"][0]["type"] == "header"
    assert f"grpo-{SID_NEW[:8]}" in new["blocks"][0]["text"]["text"]  # display name
    assert "Qwen/Qwen3.5-4B" in blob  # base model
    assert "rank 32" in blob and "alpha 64" in blob and "train unembed yes" in blob
    assert "Running" in status_field(new)
    assert f"model ml_{SID_NEW[:6]}0@rv_000000" in blob  # new-shape registration
    found = buttons(new)
    assert found["rl_wandb"]["url"] == f"https://wandb.ai/example-org/grpo-gsm8k/runs/{SID_NEW[:8]}"
    assert found["rl_subscribe"]["value"] == SID_NEW
    assert found["rl_refresh"]["value"] == SID_NEW

    old = slack.wait_for_response(old_token)
    assert old["response_type"] == "in_channel"
    old_blob = json.dumps(old)
    assert SID_OLD in old["blocks"][0]["text"]["text"]  # no display name: the id
    assert "user_123/Meta-Llama-3-8B-rl-step-10-20260216" in old_blob  # registered model_name
    assert "rank 32" in old_blob and "alpha 64" in old_blob
    assert "rl_wandb" not in buttons(old)  # no metadata.wandb in the old shape
    assert {"rl_subscribe", "rl_refresh"} <= set(buttons(old))
    assert together.requests_for(SID_NEW) == 1 and together.requests_for(SID_OLD) == 1
    # Only reads: the sessions, their resources (the card's resource line) and a price
    # (estimate-cost, Together's one POST that changes nothing).
    assert {(r.method, r.route) for r in together.requests} == {
        ("GET", "get"),
        ("GET", "resource"),
        ("POST", "estimate"),
    }
    assert "*Resource:* " in blob


def test_card_of_a_real_shaped_session(rig: Rig) -> None:
    """Exact int64 step, checkpoint kinds, error phrase, policy state, session type,
    LoRA dropout and seed, and a W&B link built from its parts, through the process."""
    sid = "523e4567-e89b-12d3-a456-426614174000"
    rig.together.add(
        sid,
        "ERROR",
        step="12345678901234567",
        type="TRAINING_SESSION_TYPE_TRAINER_AND_GENERATOR",
        resume_from_checkpoint_id="ckpt-prev",
        error={
            "code": "TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE",
            "message": "The model resource stopped.",
            "occurred_at": "2026-01-02T00:00:05Z",
        },
        policy_state={
            "applied_weights_version": "40",
            "target_weights_version": "42",
            "trainer_step": "42",
            "pending_publish": True,
        },
        metadata={"wandb": {"entity": "example-org", "project": "grpo gsm8k", "run_id": "abc1"}},
    )
    card = rig.slack.wait_for_response(ask(rig, sid)[1])
    blob = json.dumps(card, ensure_ascii=False)
    assert "12345678901234567" in blob and "12345678901234568" not in blob
    assert f"resumable state ml_{sid[:6]}t0@rv_t00000" in blob
    assert f"deployable as model ml_{sid[:6]}0@rv_000000 and adapter" in blob
    assert "registered as" not in blob
    assert "*Resumed from checkpoint:* `ckpt-prev`" in blob
    assert "Model resource unavailable" in blob and "*Next step:*" in blob
    assert "TRAINING_SESSION_ERROR_CODE_" not in blob
    assert "trainer step 42 · applied weights version 40 (target 42) · pending publish" in blob
    assert "Trainer and generator" in blob
    assert "dropout 0.05" in blob and "seed 1234" in blob
    assert buttons(card)["rl_wandb"]["url"] == "https://wandb.ai/example-org/grpo%20gsm8k/runs/abc1"


def test_every_status_renders_with_its_own_emoji(rig: Rig) -> None:
    tokens = {}
    for i, raw in enumerate(STATUSES):
        sid = f"status-{i:02d}-{uuid.uuid4().hex[:8]}"
        rig.together.add(sid, status=raw)
        tokens[raw] = ask(rig, sid)[1]
    emojis = set()
    for raw, word in STATUSES.items():
        card = rig.slack.wait_for_response(tokens[raw])
        assert card["response_type"] == "in_channel", raw
        field = status_field(card)
        assert word in field, (raw, field)
        assert "TRAINING_SESSION_STATUS" not in field
        emojis.add(field.split("\n", 1)[1].split(" ", 1)[0])
        if word == "Error":
            assert "no available capacity" in json.dumps(card)
    assert len(emojis) == len(STATUSES), emojis


# --- errors ------------------------------------------------------------------------------------


def test_together_errors_map_to_distinct_ephemeral_messages(rig: Rig) -> None:
    slack, together = rig.slack, rig.together
    cases = {
        "missing": "0000dead-0000-4000-8000-000000000404",  # a UUID: an id, not a name
        "401": "key-401",
        "403": "key-403",
        "429": "slow-429",
        "500": "down-500",
        "503": "down-503",
        "reset": "down-reset",
        "html": "html-200",
    }
    together.fail(cases["401"], status=401)
    together.fail(cases["403"], status=403)
    together.fail(cases["429"], status=429, headers={"Retry-After": "30"})
    together.fail(cases["500"], status=500)
    together.fail(
        cases["503"], status=503, body="<html><h1>503</h1></html>", content_type="text/html"
    )
    together.fail(cases["reset"], disconnect=True)
    together.fail(cases["html"], body="<html><body>login</body></html>", content_type="text/html")
    tokens = {name: ask(rig, sid)[1] for name, sid in cases.items()}
    answers = {name: slack.wait_for_response(token, timeout=15) for name, token in tokens.items()}

    for name, answer in answers.items():
        assert answer["response_type"] == "ephemeral", name
        assert "<html" not in json.dumps(answer), name  # Together's body is never echoed
    text = {name: answer["text"] for name, answer in answers.items()}
    assert "no training session" in text["missing"]
    assert "API key" in text["401"] and text["401"] == text["403"]
    assert "rate limiting" in text["429"]
    assert "unavailable" in text["500"]
    assert text["500"] == text["503"] == text["reset"]  # 5xx and connection errors alike
    assert "could not read" in text["html"]
    kinds = [text["missing"], text["401"], text["429"], text["500"], text["html"]]
    assert len(set(kinds)) == len(kinds), kinds

    # 401/403 are an operator problem: logged as an error naming the session.
    def operator_errors() -> set[str]:
        found = set()
        for line in rig.bot.log().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("level") == "ERROR" and "rejected the API key" in record.get("msg", ""):
                found.add(record.get("session_id"))
        return found

    assert {cases["401"], cases["403"]} <= operator_errors()
    assert not {cases["missing"], cases["429"], cases["500"]} & operator_errors()
    # transient ones were retried (bounded), permanent ones were not
    assert together.requests_for(cases["500"]) == 3
    assert together.requests_for(cases["401"]) == 1
    assert together.requests_for(cases["missing"]) == 1


# --- usage ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "help", "HELP", "--help"])
def test_empty_text_and_help_answer_usage_in_the_ack(rig: Rig, text: str) -> None:
    response, _ = ask(rig, text)
    body = response.json()
    assert body["response_type"] == "ephemeral"
    blob = json.dumps(body)
    for form in (
        "/rl-session &lt;id&gt;",
        "/rl-session subscribe &lt;id&gt;",
        "/rl-session unsubscribe &lt;id&gt;",
        "/rl-session list",
        "/rl-session help",
    ):
        assert form in blob, form
    time.sleep(0.3)
    assert rig.slack.responses == {} and rig.slack.calls == []
    assert rig.together.total_requests == 0


def test_misused_verbs_get_usage_with_the_problem(rig: Rig) -> None:
    for text, problem in (
        ("list everything", "`list` takes no arguments"),
        (f"unsubscribe {SID_NEW} {SID_OLD}", "`unsubscribe` takes exactly one session id"),
        ("unsubscribe", "`unsubscribe` takes exactly one session id"),
        ("subscribe", "`subscribe`"),
        ("what is this", "did not understand"),
        ("digest on 09:00 America", "digest"),  # once crashed the parser (a tz directory)
    ):
        body = ask(rig, text)[0].json()
        assert body["response_type"] == "ephemeral"
        assert problem in body["text"], body
        assert "/rl-session subscribe &lt;id&gt;" in json.dumps(body)
    assert rig.together.total_requests == 0


# --- ack first ----------------------------------------------------------------------------------


def test_ack_is_immediate_while_together_takes_two_seconds(rig: Rig) -> None:
    rig.together.add(SID_NEW)
    rig.together.latency = 2.0
    started = time.monotonic()
    response, token = ask(rig, SID_NEW)
    acked = time.monotonic() - started
    assert acked < 1.9, f"ack took {acked:.2f}s"  # waiting for Together would take 2 s
    assert response.content == b""
    card = rig.slack.wait_for_response(token, timeout=10)
    arrived = rig.slack.response_attempts[0].at - started
    assert arrived >= 1.9  # the card waited for Together; the ack did not
    assert card["response_type"] == "in_channel"
    assert f"grpo-{SID_NEW[:8]}" in json.dumps(card)
    assert rig.together.requests_for(SID_NEW) == 1  # answered, not timed out and retried


# --- commands we do not own -----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["/other", "/rl-sessions", "/RL-SESSION"])
def test_a_command_the_app_does_not_own_is_answered_politely(rig: Rig, command: str) -> None:
    rig.together.add(SID_NEW)
    response, _ = ask(rig, f"subscribe {SID_NEW}", command=command)
    body = response.json()
    assert body["response_type"] == "ephemeral"
    assert "/rl-session" in body["text"]
    time.sleep(0.5)
    assert rig.together.total_requests == 0
    assert rig.slack.responses == {} and rig.slack.calls == []
    assert rig.query("SELECT count(*) FROM subscriptions") == [(0,)]
