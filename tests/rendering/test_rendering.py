"""Rendering tests: both API shapes, every status, escaping and Block Kit limits.

No mocks: sessions are built from dicts shaped like the examples in the two
Together API pages, and messages are checked as the JSON Slack would receive.
"""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.rendering import (
    ListedSubscription,
    Message,
    card,
    checkpoint_message,
    error_code_words,
    escape,
    help_message,
    home_view,
    notice,
    oncall_alert,
    operator_alert,
    slack_date,
    status_emoji,
    status_words,
    subscription_list,
    transition_message,
    truncate,
    unsubscribed_message,
)
from bot.rendering.terminal import as_text
from bot.training.sessions import TrainingSession
from bot.training.transitions import CheckpointNews
from tests.block_kit import block_kit_problems
from tests.support.blocks import (
    MENTION,
    PERMALINK,
    PERMALINK_TOKEN,
    TRUSTED_MENTION_RE,
    assert_inert,
    assert_valid,
    buttons,
    text_fields,
)
from tests.support.untrusted import (
    ERROR_PHRASES,
    PROPERTY_SETTINGS,
    SESSION_ID,
    STATUSES,
    raw_status,
    sessions,
    untrusted,
)

# The older API page's example (no display_name, registration{model_name, registered_at}).
OLD_SHAPE: dict[str, Any] = {
    "id": SESSION_ID,
    "error": {
        "message": "The session could not start because the selected resource has no available capacity.",
        "occurred_at": "2026-01-02T00:00:05Z",
    },
    "inference_checkpoints": [
        {
            "id": "123e4567-e89b-12d3-a456-426614174000",
            "created_at": "2026-01-02T00:00:00Z",
            "registration": {
                "model_name": "username/Meta-Llama-3-8B-rl-step-42-20260216",
                "registered_at": "2026-01-02T00:00:00Z",
            },
        }
    ],
    "training_checkpoints": [
        {"id": "123e4567-e89b-12d3-a456-426614174000", "created_at": "2026-01-02T00:00:00Z"}
    ],
    "resume_from_checkpoint_id": "123e4567-e89b-12d3-a456-426614174000",
    "created_at": "2026-01-02T00:00:00Z",
    "updated_at": "2026-01-02T00:00:05Z",
    "lora_config": {"rank": 32, "alpha": 64},
    "model_resources_id": "123e4567-e89b-12d3-a456-426614174000",
    "created_by": "user_123",
}

# The newer API page's example (display_name, base_model, metadata.wandb, policy_state,
# registration{model, adapter}).
NEW_SHAPE: dict[str, Any] = {
    "id": SESSION_ID,
    "display_name": "gsm8k-experiment-2",
    "status": "TRAINING_SESSION_STATUS_RUNNING",
    "metadata": {
        "wandb": {
            "entity": "example-org",
            "project": "grpo-gsm8k",
            "group": "gsm8k-35b-sweep",
            "run_name": "exp2-thinking-4k-ctx",
            "run_id": "abc123",
            "url": "https://wandb.ai/example-org/example-project/runs/run-id",
        }
    },
    "error": {
        "message": "The session could not start because the selected resource has no available capacity.",
        "occurred_at": "2026-01-02T00:00:05Z",
    },
    "inference_checkpoints": [
        {
            "id": "123e4567-e89b-12d3-a456-426614174000",
            "created_at": "2026-01-02T00:00:00Z",
            "registration": {
                "model": {"id": "ml_abc123", "revision_id": "rv_def456"},
                "adapter": {"id": "ml_abc123", "revision_id": "rv_def456"},
            },
        }
    ],
    "training_checkpoints": [
        {
            "id": "123e4567-e89b-12d3-a456-426614174000",
            "created_at": "2026-01-02T00:00:00Z",
            "registration": {"id": "ml_abc123", "revision_id": "rv_def456"},
        }
    ],
    "resume_from_checkpoint_id": "123e4567-e89b-12d3-a456-426614174000",
    "created_at": "2026-01-02T00:00:00Z",
    "updated_at": "2026-01-02T00:00:05Z",
    "lora_config": {"rank": 32, "alpha": 64, "train_unembed": True},
    "model_resources_id": "123e4567-e89b-12d3-a456-426614174000",
    "base_model": "Qwen/Qwen3.5-4B",
    "created_by": "user_123",
    "policy_state": {"pending_publish": True},
}

WORDS = ["Creating", "Running", "Stopping", "Stopped", "Error", "Expired", "Unspecified", "Paused"]


def session(data: dict[str, Any], **changes: Any) -> TrainingSession:
    merged = copy.deepcopy(data)
    merged.update(changes)
    return TrainingSession.model_validate(merged)


# --- both API shapes -----------------------------------------------------------


def test_old_shape_card() -> None:
    msg = card(session(OLD_SHAPE))
    assert_valid(msg)
    shown = as_text(msg)
    assert SESSION_ID in shown
    assert "Unspecified" in shown  # the old example has no status
    assert "username/Meta-Llama-3-8B-rl-step-42-20260216" in shown
    assert "rank 32" in shown and "alpha 64" in shown
    assert "Resumed from checkpoint" in shown
    assert "no available capacity" in shown
    assert "training 1 · inference 1" in shown
    assert "user_123" in shown
    assert "rl_wandb" not in buttons(msg)
    assert msg["text"] == f"Unspecified · {SESSION_ID}"


def test_new_shape_card() -> None:
    msg = card(session(NEW_SHAPE))
    assert_valid(msg)
    header = msg["blocks"][0]
    assert header["type"] == "header"
    assert header["text"]["type"] == "plain_text"
    assert header["text"]["text"] == ":arrow_forward: gsm8k-experiment-2"
    shown = as_text(msg)
    for expected in (
        "Qwen/Qwen3.5-4B",
        "model ml_abc123@rv_def456",
        "adapter ml_abc123@rv_def456",
        "train unembed yes",
        "pending publish",
        "Running",
        "Last updated 2026-01-02T00:00:05Z",
    ):
        assert expected in shown
    assert buttons(msg)["rl_wandb"]["url"] == NEW_SHAPE["metadata"]["wandb"]["url"]
    assert "[W&B run] https://wandb.ai/example-org/example-project/runs/run-id" in shown
    assert msg["text"] == f"Running · gsm8k-experiment-2 ({SESSION_ID})"


def test_card_buttons_follow_subscription() -> None:
    s = session(NEW_SHAPE)
    unsubscribed = buttons(card(s))
    assert unsubscribed["rl_subscribe"]["value"] == SESSION_ID
    assert unsubscribed["rl_subscribe"]["style"] == "primary"
    assert unsubscribed["rl_refresh"]["value"] == SESSION_ID
    assert "rl_unsubscribe" not in unsubscribed

    subscribed = buttons(card(s, subscribed=True))
    assert subscribed["rl_unsubscribe"]["value"] == SESSION_ID
    assert subscribed["rl_refresh"]["value"] == SESSION_ID
    assert "rl_subscribe" not in subscribed


def test_card_is_a_function_of_the_session_unless_now_is_given() -> None:
    s = session(NEW_SHAPE)
    assert card(s) == card(s)
    fetched = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert "Last updated 2026-03-01T12:00:00Z" in as_text(card(s, now=fetched))


def test_card_without_optional_fields() -> None:
    msg = card(TrainingSession.model_validate({"id": "abc"}))
    assert_valid(msg)
    shown = as_text(msg)
    assert "abc" in shown and "training 0 · inference 0" in shown
    assert "LoRA" not in shown and "Error" not in shown and "Step" not in shown


def test_step_as_string_is_shown() -> None:
    msg = card(session(NEW_SHAPE, step="42"))
    assert "Step: 42" in as_text(msg)


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        {},
        {"wandb": None},
        {"wandb": {"url": "javascript:alert(1)"}},
        {"wandb": {"url": "https://wandb.ai/x|click"}},
        {"wandb": {"url": "https://wandb.ai/<!channel>"}},
        {"wandb": {"url": 42}},
        {"wandb": "https://wandb.ai/x"},
    ],
)
def test_no_wandb_button_without_a_safe_url(metadata: Any) -> None:
    msg = card(session(NEW_SHAPE, metadata=metadata))
    assert_valid(msg)
    assert "rl_wandb" not in buttons(msg)
    assert "W&B" not in as_text(msg)


def test_card_without_a_usable_id_has_no_id_buttons() -> None:
    msg = card(session(NEW_SHAPE, id="x" * 3000))
    assert_valid(msg)
    assert set(buttons(msg)) == {"rl_wandb"}


# --- statuses --------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "word"), list(zip(STATUSES, WORDS, strict=True)))
def test_every_status_renders(raw: str, word: str) -> None:
    assert status_words(raw) == word
    msg = card(session(NEW_SHAPE, status=raw))
    assert_valid(msg)
    assert msg["blocks"][0]["text"]["text"].startswith(status_emoji(raw))
    assert f"Status: {status_emoji(raw)} {word}" in as_text(msg)
    assert msg["text"].startswith(f"{word} · ")


def test_status_emojis_are_distinct() -> None:
    emojis = [status_emoji(raw) for raw in STATUSES]
    assert len(set(emojis)) == len(STATUSES)
    assert all(re.fullmatch(r":[a-z0-9_+-]+:", e) for e in emojis)


def test_status_short_names_and_odd_values() -> None:
    assert status_words("RUNNING") == "Running"
    assert status_words("") == "Unspecified"
    assert status_words("TRAINING_SESSION_STATUS_WAITING_FOR_GPU") == "Waiting for gpu"
    odd = status_words("TRAINING_SESSION_STATUS_<!channel>")
    assert "<" not in odd and "&lt;" in odd
    assert len(status_words("X" * 10_000)) <= 80
    assert status_emoji("TRAINING_SESSION_STATUS_PAUSED") != status_emoji("")


# --- escaping and truncation --------------------------------------------------------------


def test_escape() -> None:
    assert escape("<!channel> & <@U123>") == "&lt;!channel&gt; &amp; &lt;@U123&gt;"
    assert escape("&lt;") == "&amp;lt;"
    assert escape("a\x00b\x1b[31mc\rd\n\te\x7f\u202e") == "ab[31mcd\n\te"


def test_truncate() -> None:
    assert truncate("short", 10) == "short"
    assert truncate("abcdefghij", 5) == "abcd…"
    assert len(truncate("x" * 10_000, 3000)) == 3000
    # never half an entity
    cut = truncate(escape("ab&cd"), 5)
    assert cut == "ab…"
    # never half of one of our tokens
    token = slack_date(datetime(2026, 1, 2, tzinfo=UTC))
    assert truncate("see " + token + " later", 20) == "see…"
    # astral characters count double, so the result fits however Slack counts
    assert len(truncate("😀" * 100, 11).encode("utf-16-le")) // 2 <= 11
    assert truncate("abc", 0) == ""


def test_slack_date() -> None:
    assert slack_date(None) == "—"
    aware = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    assert slack_date(aware) == (
        "<!date^1767315845^{date_short_pretty} at {time}|2026-01-02T01:04:05Z>"
    )
    naive = datetime(2026, 1, 2, 1, 4, 5)
    assert slack_date(naive) == slack_date(aware)
    extreme = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))
    assert "<" not in slack_date(extreme)  # overflow: shown, not raised


def test_injection_in_every_field_is_inert() -> None:
    evil = "<!channel> <@U123> <https://evil.example|click> &lt;"
    data = copy.deepcopy(NEW_SHAPE)
    data.update(
        display_name=evil,
        base_model=evil,
        created_by=evil,
        model_resources_id=evil,
        resume_from_checkpoint_id=evil,
        status="TRAINING_SESSION_STATUS_ERROR",
        error={"code": evil, "message": evil, "occurred_at": "2026-01-02T00:00:05Z"},
    )
    data["inference_checkpoints"][0]["id"] = evil
    data["inference_checkpoints"][0]["registration"] = {"model_name": evil}
    data["training_checkpoints"][0]["registration"] = {"id": evil, "revision_id": evil}
    s = TrainingSession.model_validate(data)
    for msg in (
        card(s),
        transition_message(s, "TRAINING_SESSION_STATUS_RUNNING", s.status, ended=True),
        oncall_alert(s, permalink=PERMALINK, mention=MENTION),
    ):
        assert_valid(msg)
        assert_inert(msg, PERMALINK_TOKEN, MENTION)
    # the terminal rendering shows the text as it was written
    assert evil in as_text(card(s))


# --- real shapes: checkpoint kinds, error codes, policy state ------------------


def _line_with(shown: str, needle: str) -> str:
    [line] = [line for line in shown.splitlines() if needle in line]
    return line


def test_training_checkpoints_are_resumable_state_not_a_registered_model() -> None:
    shown = as_text(card(session(NEW_SHAPE)))
    assert "Latest training checkpoints* (training state to resume from)" in shown
    training = shown.split("*Latest training checkpoints*")[1].split("*Latest inference")[0]
    assert "resumable state ml_abc123@rv_def456" in training
    assert "registered as" not in shown and "deployable" not in training


def test_inference_checkpoints_are_deployable_model_and_adapter() -> None:
    shown = as_text(card(session(NEW_SHAPE)))
    inference = shown.split("*Latest inference checkpoints*")[1]
    assert "(weights to deploy)" in inference
    assert "deployable as model ml_abc123@rv_def456 and adapter ml_abc123@rv_def456" in inference
    assert "resumable" not in inference
    old = as_text(card(session(OLD_SHAPE)))
    assert "deployable as username/Meta-Llama-3-8B-rl-step-42-20260216" in old
    assert "resumable state" not in old  # the old shape's training checkpoint has none


def test_checkpoint_events_name_each_kind_for_what_it_is() -> None:
    items = [
        {"kind": "training", "id": "t1", "step": 10, "registered": ["ml_t@rv_t"], "event": "new"},
        {
            "kind": "inference",
            "id": "i1",
            "step": 10,
            "registered": ["model ml_m@rv_m", "adapter ml_a@rv_a"],
            "event": "registered",
        },
        {"kind": "inference", "id": "i2", "step": 20, "registered": [], "event": "new"},
    ]
    msg = checkpoint_message(session(NEW_SHAPE), [CheckpointNews.model_validate(i) for i in items])
    assert_valid(msg)
    shown = as_text(msg)
    assert "*Training checkpoint new:* `t1` · step 10 · resumable state ml_t@rv_t" in shown
    assert (
        "*Inference checkpoint registered:* `i1` · step 10 · "
        "deployable as model ml_m@rv_m and adapter ml_a@rv_a"
    ) in shown
    assert _line_with(shown, "`i2`").endswith("step 20")
    assert "registered as" not in shown


def test_resumed_from_is_shown() -> None:
    shown = as_text(card(session(NEW_SHAPE, resume_from_checkpoint_id="ckpt-prev")))
    assert "*Resumed from checkpoint:* `ckpt-prev`" in shown


@pytest.mark.parametrize(("code", "phrase"), list(ERROR_PHRASES.items()))
def test_each_documented_error_code_has_a_phrase_and_a_next_step(code: str, phrase: str) -> None:
    assert error_code_words(code)[0] == phrase
    assert error_code_words(code)[1]
    error = {"code": code, "message": "it broke", "occurred_at": "2026-01-02T00:00:05Z"}
    s = session(NEW_SHAPE, status="TRAINING_SESSION_STATUS_ERROR", error=error)
    short = code.removeprefix("TRAINING_SESSION_ERROR_CODE_")
    told = [
        transition_message(s, "TRAINING_SESSION_STATUS_RUNNING", s.status, ended=True),
        oncall_alert(s, permalink=None, mention=None),
    ]
    for msg in [card(s), *told]:
        assert_valid(msg)
        shown = as_text(msg)
        assert phrase in shown and f"`{short}`" in shown
        assert "*Next step:*" in shown
        assert code not in shown  # the long enum name is not shown
    for msg in told:  # the notification text says it too
        assert f"Error: {phrase}: it broke" in msg["text"]


@pytest.mark.parametrize(
    ("code", "phrase"),
    [
        ("TRAINING_SESSION_ERROR_CODE_FOO_BAR", "Foo bar"),
        ("NO_CAPACITY", "No capacity"),
        ("OOM", "Oom"),
        ("  ", "Unknown error"),
    ],
)
def test_unknown_error_codes_are_humanised(code: str, phrase: str) -> None:
    assert error_code_words(code) == (phrase, None)


def test_policy_state_type_lora_dropout_and_seed_are_shown() -> None:
    s = session(
        NEW_SHAPE,
        type="TRAINING_SESSION_TYPE_TRAINER_AND_GENERATOR",
        lora_config={"rank": 32, "alpha": 64, "dropout": 0.05, "seed": "98765432109876543"},
        policy_state={
            "applied_weights_version": "40",
            "target_weights_version": "42",
            "trainer_step": "42",
            "pending_publish": True,
        },
    )
    msg = card(s)
    assert_valid(msg)
    shown = as_text(msg)
    assert "Type: Trainer and generator" in shown
    assert "*LoRA:* rank 32 · alpha 64 · dropout 0.05 · seed 98765432109876543" in shown
    assert (
        "*Policy state:* trainer step 42 · applied weights version 40 (target 42) · pending publish"
    ) in shown
    in_sync = session(
        NEW_SHAPE,
        type="TRAINER_ONLY",
        policy_state={
            "applied_weights_version": 42,
            "target_weights_version": 42,
            "trainer_step": 42,
            "pending_publish": False,
        },
    )
    shown = as_text(card(in_sync))
    assert "*Policy state:* trainer step 42 · applied weights version 42\n" in shown + "\n"
    assert "Type: Trainer only" in shown


def test_a_17_digit_step_is_shown_exactly() -> None:
    s = session(NEW_SHAPE, step="12345678901234567")
    shown = as_text(card(s))
    assert "Step: 12345678901234567" in shown
    assert "12345678901234568" not in shown
    items = [CheckpointNews(kind="training", id="t", step=s.step, event="new")]
    assert "Latest step 12345678901234567" in as_text(checkpoint_message(s, items))


def test_wandb_button_built_from_entity_project_and_run_id() -> None:
    wandb = {"entity": "example-org", "project": "grpo gsm8k", "run_id": "abc123"}
    msg = card(session(NEW_SHAPE, metadata={"wandb": wandb}))
    assert (
        buttons(msg)["rl_wandb"]["url"] == "https://wandb.ai/example-org/grpo%20gsm8k/runs/abc123"
    )


def test_home_empty_state_escapes_the_id_placeholder() -> None:
    view = home_view([], [])
    texts = list(text_fields(view))
    assert any("`/rl-session subscribe &lt;id&gt;`" in t for t in texts)
    for text in texts:
        assert "<id>" not in text


# The session behind the example card in docs/commands.md.
README_EXAMPLE: dict[str, Any] = {
    "id": "123e4567-e89b-12d3-a456-426614174000",
    "display_name": "gsm8k-experiment-2",
    "status": "TRAINING_SESSION_STATUS_RUNNING",
    "base_model": "Qwen/Qwen3.5-4B",
    "model_resources_id": "223e4567-e89b-12d3-a456-426614174000",
    "created_by": "user_123",
    "created_at": "2026-01-02T00:00:00Z",
    "updated_at": "2026-01-02T01:00:00Z",
    "step": "42",
    "policy_state": {
        "applied_weights_version": "41",
        "target_weights_version": "42",
        "trainer_step": "42",
        "pending_publish": True,
    },
    "lora_config": {
        "rank": 32,
        "alpha": 64,
        "dropout": 0.05,
        "seed": "1234",
        "train_unembed": True,
    },
    "metadata": {"wandb": {"entity": "example-org", "project": "grpo-gsm8k", "run_id": "abc123"}},
    "training_checkpoints": [
        {
            "id": "ckpt-train-40",
            "created_at": "2026-01-02T00:50:00Z",
            "step": "40",
            "registration": {"id": "ml_abc123", "revision_id": "rv_def456"},
        }
    ],
    "inference_checkpoints": [
        {
            "id": "ckpt-infer-40",
            "created_at": "2026-01-02T00:50:00Z",
            "step": "40",
            "registration": {
                "model": {"id": "ml_ghi789", "revision_id": "rv_jkl012"},
                "adapter": {"id": "ml_mno345", "revision_id": "rv_pqr678"},
            },
        }
    ],
}


def test_readme_example_card_is_what_the_bot_posts() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "commands.md").read_text()
    after = page.split("Example card, exactly as `chat.postMessage` receives it", 1)[1]
    example = json.loads(after.split("```json\n", 1)[1].split("\n```", 1)[0])
    assert example == card(session(README_EXAMPLE)), (
        "docs/commands.md's example card is out of date: paste json.dumps(card(...)) of README_EXAMPLE"
    )


# --- limits with huge inputs ---------------------------------------------------------------


def _checkpoints(count: int, *, old: bool) -> list[dict[str, Any]]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    result = []
    for i in range(count):
        registration = (
            {"model_name": f"user/model-step-{i}-" + "n" * 3000}
            if old
            else {"model": {"id": f"ml_{i}" + "m" * 3000}, "adapter": {"id": f"ad_{i}"}}
        )
        result.append(
            {
                "id": f"ckpt-{i:03d}-" + "i" * 3000,
                "created_at": (start + timedelta(minutes=(i * 37) % count)).isoformat(),
                "step": i,
                "registration": registration,
            }
        )
    return result


def test_huge_inputs_stay_within_limits() -> None:
    data = copy.deepcopy(NEW_SHAPE)
    data.update(
        display_name="N" * 5000,
        base_model="B" * 5000,
        created_by="<!channel>" * 1000,
        status="TRAINING_SESSION_STATUS_ERROR",
        error={"code": "C" * 5000, "message": "&<>" * 3334, "occurred_at": "2026-01-02T00:00:05Z"},
        inference_checkpoints=_checkpoints(400, old=True),
        training_checkpoints=_checkpoints(400, old=False),
    )
    s = TrainingSession.model_validate(data)
    msg = card(s)
    assert_valid(msg)
    assert_inert(msg)
    dumped = json.dumps(msg, ensure_ascii=False)
    assert "and 397 more training checkpoints" in dumped
    assert "and 397 more inference checkpoints" in dumped
    assert len(msg["blocks"][0]["text"]["text"]) <= 150
    for other in (
        transition_message(s, "TRAINING_SESSION_STATUS_RUNNING", s.status, ended=True),
        transition_message(s, s.status, s.status, ended=True, gone=True),
        oncall_alert(s, permalink=PERMALINK, mention=MENTION),
    ):
        assert_valid(other)
        assert_inert(other, PERMALINK_TOKEN, MENTION)


def test_latest_checkpoints_are_newest_first() -> None:
    checkpoints = [
        {"id": "old", "created_at": "2026-01-01T00:00:00Z"},
        {"id": "newest", "created_at": "2026-01-04T00:00:00+00:00"},
        {"id": "undated"},
        {"id": "naive", "created_at": "2026-01-03T00:00:00"},
        {"id": "middle", "created_at": "2026-01-02T00:00:00Z"},
    ]
    shown = as_text(card(session(NEW_SHAPE, training_checkpoints=checkpoints)))
    order = [shown.index(f"`{name}`") for name in ("newest", "naive", "middle")]
    assert order == sorted(order)
    assert "`old`" not in shown and "`undated`" not in shown
    assert "and 2 more training checkpoints" in shown


# --- thread replies and alerts -----------------------------------------------------------


def test_transition_to_error_names_both_statuses_and_the_error() -> None:
    s = session(
        NEW_SHAPE,
        status="TRAINING_SESSION_STATUS_ERROR",
        error={"code": "NO_CAPACITY", "message": "no <!here> capacity"},
    )
    msg = transition_message(
        s, "TRAINING_SESSION_STATUS_RUNNING", "TRAINING_SESSION_STATUS_ERROR", ended=True
    )
    assert_valid(msg)
    assert_inert(msg)
    shown = as_text(msg)
    assert "*Status changed:* :arrow_forward: Running → :red_circle: Error" in shown
    assert "NO_CAPACITY" in shown and "no <!here> capacity" in shown
    assert "This session has finished, so this subscription has ended; no further updates." in shown
    assert "Running → Error" in msg["text"] and "subscription has ended" in msg["text"]


def test_transition_not_ended() -> None:
    msg = transition_message(
        session(NEW_SHAPE),
        "TRAINING_SESSION_STATUS_CREATING",
        "TRAINING_SESSION_STATUS_RUNNING",
        ended=False,
    )
    assert_valid(msg)
    shown = as_text(msg)
    assert "Creating → :arrow_forward: Running" in shown
    assert "subscription" not in shown and "Error" not in shown


def test_transition_when_gone() -> None:
    msg = transition_message(
        session(NEW_SHAPE),
        "TRAINING_SESSION_STATUS_RUNNING",
        "TRAINING_SESSION_STATUS_RUNNING",
        ended=True,
        gone=True,
    )
    assert_valid(msg)
    shown = as_text(msg)
    assert "no longer exists on Together" in shown
    assert "subscription has ended" in shown
    assert "has finished" not in shown  # one closing line, not two


def test_oncall_alert() -> None:
    s = session(NEW_SHAPE, status="TRAINING_SESSION_STATUS_ERROR", error={"code": "OOM"})
    msg = oncall_alert(s, permalink=PERMALINK, mention=MENTION)
    assert_valid(msg)
    assert msg["text"].startswith(MENTION)
    assert msg["blocks"][0]["text"]["text"].startswith(MENTION)
    assert PERMALINK_TOKEN in json.dumps(msg)
    shown = as_text(msg)
    for expected in ("gsm8k-experiment-2", SESSION_ID, "OOM", "Qwen/Qwen3.5-4B", "user_123"):
        assert expected in shown
    assert f"View thread ({PERMALINK})" in shown


@pytest.mark.parametrize(
    "mention", ["<!here>", "<!channel>", "<@U0123ABC>", "<@W0123ABC>", "<!subteam^S0123>"]
)
def test_oncall_alert_trusted_mentions_pass_through(mention: str) -> None:
    msg = oncall_alert(session(NEW_SHAPE), permalink=None, mention=mention)
    assert msg["blocks"][0]["text"]["text"].startswith(mention + " ")


@pytest.mark.parametrize(
    "mention", ["<!everyone>", "<https://evil|x>", "<@U123> <!channel>", "@here", "<!subteam^s1>"]
)
def test_oncall_alert_other_mentions_are_escaped(mention: str) -> None:
    msg = oncall_alert(session(NEW_SHAPE), permalink=None, mention=mention)
    assert_valid(msg)
    assert_inert(msg)


@pytest.mark.parametrize(
    "permalink",
    [None, "javascript:alert(1)", "https://x.slack.com/a|evil", "https://x/<!channel>", "ftp://x"],
)
def test_oncall_alert_unsafe_permalink_is_left_out(permalink: str | None) -> None:
    msg = oncall_alert(session(NEW_SHAPE), permalink=permalink, mention=None)
    assert_valid(msg)
    assert_inert(msg)
    assert "View thread" not in json.dumps(msg)


def test_operator_alert_escapes_detail() -> None:
    msg = operator_alert(
        "Together rejected the API key", "401 from Together: <!channel> bad key", mention=MENTION
    )
    assert_valid(msg)
    assert_inert(msg, MENTION)
    shown = as_text(msg)
    assert "Together rejected the API key" in shown and "<!channel> bad key" in shown
    assert msg["text"].startswith(MENTION)
    assert_valid(operator_alert("Together recovered", "", mention=None))


def test_help_names_every_form() -> None:
    msg = help_message()
    assert_valid(msg)
    assert_inert(msg)
    shown = as_text(msg)
    for form in (
        "/rl-session <id>",
        "/rl-session subscribe <id>",
        "/rl-session unsubscribe <id>",
        "/rl-session list",
        "/rl-session help",
    ):
        assert form in shown
        assert form in as_text({"text": msg["text"], "blocks": []})


def test_notice_is_not_escaped_but_is_cut() -> None:
    msg = notice("Session `abc` was *not* found. See <https://docs.together.ai|the docs>.")
    assert msg["blocks"][0]["text"]["text"].endswith("<https://docs.together.ai|the docs>.")
    big = notice("x" * 10_000)
    assert_valid(big)
    assert_valid(notice(""))


def test_subscription_list() -> None:
    empty = subscription_list([])
    assert_valid(empty)
    assert "This channel has no subscriptions. Use `/rl-session subscribe <id>`." in as_text(empty)

    rows: list[tuple[str, str | None, str | None, str | None]] = [
        ("abc", "My run <!channel>", "TRAINING_SESSION_STATUS_RUNNING", "https://x.slack.com/p1"),
        ("def", None, None, None),
        ("ghi", None, "TRAINING_SESSION_STATUS_PAUSED", "javascript:alert(1)"),
    ]
    msg = subscription_list([ListedSubscription(*row) for row in rows])
    assert_valid(msg)
    assert_inert(msg, "<https://x.slack.com/p1|thread>")
    shown = as_text(msg)
    assert ":arrow_forward: Running" in shown and "thread (https://x.slack.com/p1)" in shown
    assert "Paused" in shown and "javascript" not in shown
    assert "My run <!channel>" in shown

    # a thread's own options, as typed; none shown for a thread at the defaults
    tuned = ListedSubscription("abc", None, None, options=("stall=45m", "dm=creator"))
    line = as_text(subscription_list([tuned, ListedSubscription("def", None, None)]))
    assert "`stall=45m` `dm=creator`" in line
    assert line.count("`stall=") == 1


def test_subscription_list_past_the_block_limit() -> None:
    rows = [
        (f"id-{i}" + "x" * 120, "N" * 5000, "TRAINING_SESSION_STATUS_RUNNING", PERMALINK)
        for i in range(500)
    ]
    msg = subscription_list([ListedSubscription(*row) for row in rows])
    assert_valid(msg)
    assert len(msg["blocks"]) <= 50
    last = msg["blocks"][-1]["elements"][0]["text"]
    match = re.fullmatch(r"…and (\d+) more", last)
    assert match
    shown_rows = sum(
        b["text"]["text"].count("\n") + 1 for b in msg["blocks"] if b["type"] == "section"
    )
    assert shown_rows + int(match.group(1)) == 500


def test_unsubscribed_message() -> None:
    ok = unsubscribed_message("U0123ABC")
    assert_valid(ok)
    assert ok["text"] == "<@U0123ABC> unsubscribed this channel; no further updates here."
    bad = unsubscribed_message("U1> <!channel")
    assert_valid(bad)
    assert_inert(bad)


# --- terminal rendering ---------------------------------------------------------------


def test_as_text_round_trip() -> None:
    name = "exp <b> & <!channel> &lt;"
    shown = as_text(card(session(NEW_SHAPE, display_name=name)))
    assert name in shown.splitlines()[0]
    assert "2026-01-02T00:00:00Z" in shown and "<!date" not in shown
    assert "[Subscribe]  [Refresh]  [Chart]  [Stop session]  [W&B run] https://wandb.ai/" in shown


def test_as_text_tokens() -> None:
    message: Message = {
        "text": "x",
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": "<https://a.example/b?c=1&amp;d=2|a &amp; b> <@U1> <!here> "
                    "<!subteam^S1> &amp;lt; \x1b[2J",
                },
            }
        ],
    }
    assert as_text(message) == "a & b (https://a.example/b?c=1&d=2) @U1 @here @S1 &lt; [2J"


# --- block_kit_problems must itself catch violations --------------------------------------


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _button(action_id: str, **extra: Any) -> dict[str, Any]:
    button = {
        "type": "button",
        "text": {"type": "plain_text", "text": "Go"},
        "action_id": action_id,
    }
    return button | extra


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ({"text": "x", "blocks": [_section("a")] * 51}, "51 blocks"),
        ({"text": "x", "blocks": [_section("a" * 3001)]}, "3001 characters"),
        ({"text": "x", "blocks": [_section("😀" * 1501)]}, "3002 characters"),
        ({"text": "", "blocks": [_section("a")]}, "text fallback"),
        ({"blocks": [_section("a")]}, "text fallback"),
        ({"text": "x" * 40_001, "blocks": []}, "40001"),
        ({"text": "x", "blocks": [_section("")]}, "empty"),
        ({"text": "x", "blocks": [_section("   ")]}, "empty"),
        (
            {"text": "x", "blocks": [{"type": "section", "text": {"type": "html", "text": "a"}}]},
            "plain_text or mrkdwn",
        ),
        ({"text": "x", "blocks": [{"type": "section"}]}, "neither text nor fields"),
        (
            {
                "text": "x",
                "blocks": [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}],
            },
            "11 fields",
        ),
        (
            {
                "text": "x",
                "blocks": [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2001}]}],
            },
            "limit 2000",
        ),
        (
            {
                "text": "x",
                "blocks": [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}],
            },
            "limit 150",
        ),
        (
            {"text": "x", "blocks": [{"type": "header", "text": {"type": "mrkdwn", "text": "h"}}]},
            "must be plain_text",
        ),
        (
            {
                "text": "x",
                "blocks": [
                    {
                        "type": "actions",
                        "elements": [
                            {
                                "type": "button",
                                "text": {"type": "plain_text", "text": "b" * 76},
                                "action_id": "a",
                            }
                        ],
                    }
                ],
            },
            "limit 75",
        ),
        (
            {
                "text": "x",
                "blocks": [{"type": "actions", "elements": [_button("a", value="v" * 2001)]}],
            },
            "value longer than 2000",
        ),
        (
            {
                "text": "x",
                "blocks": [
                    {"type": "actions", "elements": [_button("a", url="https://x/" + "u" * 2991)]}
                ],
            },
            "url longer than 3000",
        ),
        (
            {
                "text": "x",
                "blocks": [{"type": "actions", "elements": [_button("a"), _button("a")]}],
            },
            "not unique",
        ),
        (
            {
                "text": "x",
                "blocks": [
                    {"type": "actions", "elements": [_button("a")]},
                    {"type": "actions", "elements": [_button("a")]},
                ],
            },
            "not unique",
        ),
        ({"text": "x", "blocks": [{"type": "actions", "elements": []}]}, "no elements"),
        (
            {
                "text": "x",
                "blocks": [{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11}],
            },
            "11 context elements",
        ),
        ({"text": "x", "blocks": [{"type": "table"}]}, "unexpected block type"),
    ],
)
def test_block_kit_problems_catches_violations(message: Message, problem: str) -> None:
    problems = block_kit_problems(message)
    assert problems, message
    assert any(problem in p for p in problems), problems


def test_block_kit_problems_accepts_the_limits_exactly() -> None:
    message: Message = {
        "text": "x" * 40_000,
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": "h" * 150}},
            _section("a" * 3000),
            {"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2000}] * 10},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 10},
            {
                "type": "actions",
                "elements": [
                    _button("a", value="v" * 2000),
                    _button("b", url="https://x/" + "u" * 2990),
                ],
            },
            {"type": "divider"},
        ]
        + [_section("a")] * 44,
    }
    assert len(message["blocks"]) == 50
    assert block_kit_problems(message) == []


# --- properties --------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(s=sessions(), subscribed=st.booleans())
def test_card_always_valid_and_inert(s: TrainingSession, subscribed: bool) -> None:
    msg = card(s, subscribed=subscribed)
    assert_valid(msg)
    assert_inert(msg)
    as_text(msg)


@PROPERTY_SETTINGS
@given(s=sessions(), old=raw_status, new=raw_status, ended=st.booleans(), gone=st.booleans())
def test_transition_always_valid_and_inert(
    s: TrainingSession, old: str, new: str, ended: bool, gone: bool
) -> None:
    msg = transition_message(s, old, new, ended=ended, gone=gone)
    assert_valid(msg)
    assert_inert(msg)


@PROPERTY_SETTINGS
@given(
    s=sessions(),
    permalink=st.one_of(st.none(), st.just(PERMALINK), untrusted),
    mention=st.one_of(st.none(), st.just(MENTION), untrusted),
)
def test_oncall_alert_always_valid_and_inert(
    s: TrainingSession, permalink: str | None, mention: str | None
) -> None:
    msg = oncall_alert(s, permalink=permalink, mention=mention)
    assert_valid(msg)
    trusted = [PERMALINK_TOKEN] if permalink == PERMALINK else []
    if mention is not None and TRUSTED_MENTION_RE.fullmatch(mention):
        trusted.append(mention)
    assert_inert(msg, *trusted)


@PROPERTY_SETTINGS
@given(
    rows=st.lists(
        st.tuples(
            untrusted,
            st.one_of(st.none(), untrusted),
            st.one_of(st.none(), raw_status),
            st.one_of(st.none(), untrusted),
        ),
        max_size=60,
    )
)
def test_subscription_list_always_valid_and_inert(
    rows: list[tuple[str, str | None, str | None, str | None]],
) -> None:
    msg = subscription_list([ListedSubscription(*row) for row in rows])
    assert_valid(msg)
    assert_inert(msg)


@PROPERTY_SETTINGS
@given(title=untrusted, detail=untrusted, user=untrusted)
def test_operator_alert_and_unsubscribed_always_valid_and_inert(
    title: str, detail: str, user: str
) -> None:
    for msg in (operator_alert(title, detail, mention=None), unsubscribed_message(user)):
        assert_valid(msg)
        assert_inert(msg)


@PROPERTY_SETTINGS
@given(text=untrusted, limit=st.integers(0, 5000))
def test_escape_then_truncate_fits_and_keeps_entities_whole(text: str, limit: int) -> None:
    escaped = escape(text)
    assert "<" not in escaped and ">" not in escaped
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", escaped)
    cut = truncate(escaped, limit)
    assert len(cut.encode("utf-16-le", "surrogatepass")) // 2 <= limit
    assert re.fullmatch(r"(?:[^&]|&amp;|&lt;|&gt;)*…?", cut, flags=re.DOTALL)
    assert cut == escaped or cut.endswith("…") or limit == 0
