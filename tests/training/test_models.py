"""Session models against the real shapes: exact int64s, the two registration
kinds, policy state, LoRA seed, session type, the W&B link, and the list cursor.
Pure: dicts in, models out."""

from __future__ import annotations

from typing import Any

import pytest

from bot.simulated.together import make_old_shape_session, make_session
from bot.together.answers import next_cursor
from bot.training.checkpoints import InferenceCheckpoint, TrainingCheckpoint
from bot.training.sessions import TrainingSession

SID = "123e4567-e89b-12d3-a456-426614174000"
BIG = "12345678901234567"  # float(BIG) == 12345678901234568.0


def parse(**over: Any) -> TrainingSession:
    return TrainingSession.model_validate(make_session(SID, **over))


# --- int64 fields --------------------------------------------------------------------------


def test_a_17_digit_string_step_round_trips_exactly() -> None:
    session = parse(step=BIG)
    assert session.step == 12345678901234567
    assert str(session.step) == BIG
    # The poller stores the snapshot as JSON and delivery reads it back.
    again = TrainingSession.model_validate(session.model_dump(mode="json"))
    assert again.step == 12345678901234567


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("42", 42),
        (42, 42),
        (" 7 ", 7),
        ("-3", -3),
        ("9007199254740993", 9007199254740993),  # 2**53 + 1: not a float
        ("12.9", 12),
        (12.9, 12),
        ("1e3", 1000),
        ("1e999999999", None),  # not a huge int
        ("nan", None),
        ("0x10", None),
        ("", None),
        (True, None),
        (None, None),
        ([1], None),
    ],
)
def test_steps_are_integers_parsed_without_float(raw: Any, expected: int | None) -> None:
    session = TrainingSession.model_validate({"id": SID, "step": raw})
    assert session.step == expected
    assert session.step is None or type(session.step) is int


def test_checkpoint_steps_and_policy_versions_are_exact() -> None:
    session = parse(
        policy_state={
            "applied_weights_version": BIG,
            "target_weights_version": "12345678901234569",
            "trainer_step": 12345678901234569,
            "pending_publish": True,
        },
        training_checkpoints=[{"id": "t", "step": BIG}],
        inference_checkpoints=[{"id": "i", "step": BIG}],
    )
    policy = session.policy_state
    assert policy is not None
    assert policy.applied_weights_version == 12345678901234567
    assert policy.target_weights_version == policy.trainer_step == 12345678901234569
    assert policy.pending_publish is True
    assert session.training_checkpoints[0].step == 12345678901234567
    assert session.inference_checkpoints[0].step == 12345678901234567


# --- LoRA, type ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seed", "expected"), [("98765432109876543", "98765432109876543"), (7, 7), (None, None)]
)
def test_lora_dropout_and_seed(seed: Any, expected: Any) -> None:
    session = parse(lora_config={"rank": "32", "alpha": 64, "dropout": 0.05, "seed": seed})
    lora = session.lora_config
    assert lora is not None
    assert (lora.rank, lora.alpha, lora.dropout, lora.seed) == (32, 64, 0.05, expected)


def test_session_type_is_kept_when_sent() -> None:
    assert parse(type="TRAINING_SESSION_TYPE_TRAINER_ONLY").type == (
        "TRAINING_SESSION_TYPE_TRAINER_ONLY"
    )
    assert parse().type is None
    assert parse(type=5).type is None  # an odd type is dropped, not fatal


# --- checkpoints ---------------------------------------------------------------------------


def test_training_registration_is_an_artifact_inference_registration_is_deployable() -> None:
    session = parse()
    [training] = session.training_checkpoints
    [inference] = session.inference_checkpoints
    assert isinstance(training, TrainingCheckpoint)
    assert isinstance(inference, InferenceCheckpoint)
    assert training.registration is not None
    assert (training.registration.id, training.registration.revision_id) == (
        f"ml_{SID[:6]}t0",
        "rv_t00000",
    )
    assert training.registered_names() == [f"ml_{SID[:6]}t0@rv_t00000"]
    assert inference.registered_names() == [
        f"model ml_{SID[:6]}0@rv_000000",
        f"adapter ml_{SID[:6]}a0@rv_a00000",
    ]


def test_snapshots_stored_before_keep_their_training_registration() -> None:
    """Earlier versions stored a training registration wrapped as {"model": {...}}."""
    stored = {
        "id": SID,
        "training_checkpoints": [
            {
                "id": "t",
                "registration": {
                    "model": {"id": "ml_t", "revision_id": "rv"},
                    "adapter": None,
                    "model_name": None,
                    "registered_at": None,
                },
            }
        ],
    }
    session = TrainingSession.model_validate(stored)
    assert session.training_checkpoints[0].registered_names() == ["ml_t@rv"]


def test_both_seed_shapes_and_odd_types_parse() -> None:
    old = TrainingSession.model_validate(make_old_shape_session(SID, "ERROR", step="3"))
    assert old.display_name is None and old.base_model is None and old.step == 3
    assert old.inference_checkpoints[0].registered_names() == [
        "user_123/Meta-Llama-3-8B-rl-step-10-20260216"
    ]
    assert old.training_checkpoints[0].registered_names() == []
    odd = TrainingSession.model_validate(
        {
            "id": SID,
            "policy_state": {"trainer_step": {"x": 1}, "pending_publish": "maybe"},
            "lora_config": {"seed": [1], "dropout": "lots"},
            "training_checkpoints": [{"id": "t", "registration": "ml_t"}],
            "inference_checkpoints": [{"id": "i", "registration": {"model": 5}}],
            "metadata": {"wandb": {"entity": 1, "project": "p", "run_id": "r"}},
        }
    )
    assert odd.policy_state is not None and odd.policy_state.trainer_step is None
    assert odd.lora_config is not None and odd.lora_config.seed is None
    assert odd.training_checkpoints[0].registration is None
    assert odd.inference_checkpoints[0].registered_names() == []
    assert odd.wandb_url is None


# --- W&B ---------------------------------------------------------------------------------


def test_wandb_url_is_used_when_given() -> None:
    assert parse().wandb_url == f"https://wandb.ai/example-org/grpo-gsm8k/runs/{SID[:8]}"


@pytest.mark.parametrize(
    ("wandb", "expected"),
    [
        (
            {"entity": "example-org", "project": "grpo-gsm8k", "run_id": "abc123"},
            "https://wandb.ai/example-org/grpo-gsm8k/runs/abc123",
        ),
        (
            {"entity": "my team", "project": "a/b?c", "run_id": "<!here>", "url": None},
            "https://wandb.ai/my%20team/a%2Fb%3Fc/runs/%3C%21here%3E",
        ),
        (
            {"entity": "o", "project": "p", "run_id": "r", "url": "javascript:alert(1)"},
            "https://wandb.ai/o/p/runs/r",
        ),
        ({"entity": "o", "project": "p"}, None),
        ({"entity": "o", "project": "", "run_id": "r"}, None),
        ({"url": "https://wandb.ai/x\n"}, None),
    ],
)
def test_wandb_url_is_built_from_entity_project_and_run_id(
    wandb: dict[str, Any], expected: str | None
) -> None:
    assert parse(metadata={"wandb": wandb}).wandb_url == expected


# --- list cursor ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"data": [], "meta": {"has_more": True, "limit": 100, "next_cursor": "c2"}}, "c2"),
        ({"data": [], "meta": {"has_more": False, "limit": 100, "next_cursor": ""}}, None),
        ({"data": [], "meta": {"has_more": True, "next_cursor": ""}}, "last"),
        ({"data": [], "meta": {"next_cursor": "c3"}}, "c3"),
        ({"data": [], "meta": {}}, None),
        ({"data": [], "has_more": True, "next_cursor": "old"}, "old"),  # older top level
        ({"data": []}, None),
    ],
)
def test_next_cursor_reads_meta(body: dict[str, Any], expected: str | None) -> None:
    assert next_cursor(body, "last") == expected  # "last": the page's last session
