"""Hypothesis strategies for what the bot must render safely: any text, known
injections, and whole sessions built from such text in both API shapes."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from bot.training.sessions import TrainingSession
from tests.support import examples
from tests.support.blocks import INJECTIONS

SESSION_ID = "123e4567-e89b-12d3-a456-426614174000"

STATUSES = [
    "TRAINING_SESSION_STATUS_CREATING",
    "TRAINING_SESSION_STATUS_RUNNING",
    "TRAINING_SESSION_STATUS_STOPPING",
    "TRAINING_SESSION_STATUS_STOPPED",
    "TRAINING_SESSION_STATUS_ERROR",
    "TRAINING_SESSION_STATUS_EXPIRED",
    "TRAINING_SESSION_STATUS_UNSPECIFIED",
    "TRAINING_SESSION_STATUS_PAUSED",
]

ERROR_PHRASES = {
    "TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE": "Model resource unavailable",
    "TRAINING_SESSION_ERROR_CODE_RESOURCE_AT_CAPACITY": "Model resource at capacity",
    "TRAINING_SESSION_ERROR_CODE_TIMED_OUT": "Timed out",
    "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED": "Session failed",
}

_pieces = st.one_of(st.sampled_from(INJECTIONS), st.text(max_size=40))
untrusted = st.one_of(
    st.text(max_size=10_000),
    st.sampled_from(INJECTIONS),
    st.lists(_pieces, max_size=30).map("".join),
    st.builds(lambda piece, n: piece * n, _pieces, st.integers(1, 3000)),
)
raw_status = st.one_of(st.sampled_from(STATUSES), untrusted)
timestamps = st.one_of(
    st.none(),
    st.sampled_from(["2026-01-02T00:00:00Z", "2026-01-02T00:00:00", "not a date", ""]),
    st.datetimes(timezones=st.one_of(st.none(), st.timezones())).map(lambda d: d.isoformat()),
)


@st.composite
def sessions(draw: st.DrawFn) -> TrainingSession:
    def checkpoint(kind: str) -> dict[str, Any]:
        registration: dict[str, Any]
        if kind == "old":
            registration = {"model_name": draw(untrusted), "registered_at": draw(timestamps)}
        elif kind == "new":
            registration = {
                "model": {"id": draw(untrusted), "revision_id": draw(untrusted)},
                "adapter": {"id": draw(untrusted)},
            }
        else:
            registration = {"id": draw(untrusted), "revision_id": draw(untrusted)}
        return {
            "id": draw(untrusted),
            "created_at": draw(timestamps),
            "step": draw(st.one_of(st.none(), st.integers(), st.text(max_size=5))),
            "registration": registration,
        }

    data: dict[str, Any] = {
        "id": draw(st.one_of(st.just(SESSION_ID), untrusted)),
        "status": draw(raw_status),
        "display_name": draw(st.one_of(st.none(), untrusted)),
        "base_model": draw(st.one_of(st.none(), untrusted)),
        "created_by": draw(st.one_of(st.none(), untrusted)),
        "model_resources_id": draw(st.one_of(st.none(), untrusted)),
        "resume_from_checkpoint_id": draw(st.one_of(st.none(), untrusted)),
        "created_at": draw(timestamps),
        "updated_at": draw(timestamps),
        "step": draw(st.one_of(st.none(), st.integers(), st.just("42"))),
        "error": draw(
            st.one_of(
                st.none(),
                st.fixed_dictionaries(
                    {
                        "code": st.one_of(
                            st.none(), untrusted, st.sampled_from(list(ERROR_PHRASES))
                        ),
                        "message": st.one_of(st.none(), untrusted),
                        "occurred_at": timestamps,
                    }
                ),
            )
        ),
        "lora_config": draw(
            st.one_of(
                st.none(),
                st.fixed_dictionaries(
                    {
                        "rank": st.integers(),
                        "alpha": st.floats(allow_nan=True),
                        "dropout": st.floats(allow_nan=True),
                        "seed": st.one_of(st.integers(), untrusted),
                        "train_unembed": st.booleans(),
                    }
                ),
            )
        ),
        "metadata": {
            "wandb": {
                "url": draw(st.one_of(st.none(), untrusted, st.just("https://wandb.ai/r"))),
                "entity": draw(untrusted),
                "project": draw(untrusted),
                "run_id": draw(untrusted),
            }
        },
        "policy_state": {
            "pending_publish": draw(st.booleans()),
            "trainer_step": draw(st.one_of(st.integers(), st.text(max_size=25))),
            "applied_weights_version": draw(st.one_of(st.integers(), st.text(max_size=25))),
            "target_weights_version": draw(st.one_of(st.integers(), st.text(max_size=25))),
        },
        "type": draw(st.one_of(st.none(), untrusted)),
        "training_checkpoints": [checkpoint("training") for _ in range(draw(st.integers(0, 5)))],
        "inference_checkpoints": [
            checkpoint(draw(st.sampled_from(["old", "new"])))
            for _ in range(draw(st.integers(0, 5)))
        ],
    }
    return TrainingSession.model_validate(data)


PROPERTY_SETTINGS = settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
