"""The state diff as a pure rule: what was seen last against what Together says now.

No process, no database: sessions are built from the Together-shaped dicts.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.simulated.together import make_old_shape_session, make_session
from bot.training.sessions import TrainingSession
from bot.training.transitions import checkpoint_keys, checkpoint_news, detect, gone

SID = "123e4567-e89b-12d3-a456-426614174000"
RUNNING = "TRAINING_SESSION_STATUS_RUNNING"


def session(status: str = "RUNNING", **over: Any) -> TrainingSession:
    return TrainingSession.model_validate(make_session(SID, status, **over))


def field(item: Any, name: str) -> Any:
    """A news item's field, whether it is a mapping or an object."""
    return item[name] if isinstance(item, dict) else getattr(item, name)


# --- detect ------------------------------------------------------------------------------


def test_no_change_is_no_transition() -> None:
    assert detect(RUNNING, session("RUNNING")) is None


def test_the_long_and_short_names_of_a_status_are_the_same_status() -> None:
    assert detect("RUNNING", session("RUNNING")) is None
    assert detect(" TRAINING_SESSION_STATUS_RUNNING ", session("RUNNING")) is None


def test_step_and_checkpoint_changes_are_not_transitions() -> None:
    assert detect(RUNNING, session("RUNNING", step="9999", checkpoints=5)) is None


@pytest.mark.parametrize(
    ("old", "new", "ended", "is_error"),
    [
        ("CREATING", "RUNNING", False, False),
        ("RUNNING", "STOPPING", False, False),
        ("STOPPING", "STOPPED", True, False),
        ("RUNNING", "ERROR", True, True),
        ("RUNNING", "EXPIRED", True, False),
        ("RUNNING", "PAUSED", False, False),  # a status Together may add later
    ],
)
def test_a_status_change_is_a_transition(old: str, new: str, ended: bool, is_error: bool) -> None:
    now = session(new)
    transition = detect(f"TRAINING_SESSION_STATUS_{old}", now)
    assert transition is not None
    assert transition.old_status == f"TRAINING_SESSION_STATUS_{old}"
    assert transition.new_status == now.status  # kept as Together sent it
    assert transition.ended is ended
    assert transition.is_error is is_error
    assert transition.gone is False


def test_a_session_that_is_gone_ends_the_subscription() -> None:
    transition = gone(RUNNING)
    assert transition.old_status == RUNNING
    assert transition.ended and transition.gone
    assert not transition.is_error


# --- checkpoint keys and news ---------------------------------------------------------------


def test_checkpoint_keys_name_each_checkpoint_and_each_registration() -> None:
    s = session(checkpoints=2)
    keys = checkpoint_keys(s)
    for cp in s.training_checkpoints:
        assert f"t:{cp.id}" in keys and f"t:{cp.id}:registered" in keys
    for cp in s.inference_checkpoints:
        assert f"i:{cp.id}" in keys and f"i:{cp.id}:registered" in keys
    assert len(keys) == 8


def test_checkpoints_without_an_id_or_a_registration() -> None:
    s = TrainingSession.model_validate(
        {
            "id": SID,
            "training_checkpoints": [{"id": ""}, {"id": "t1"}],
            "inference_checkpoints": [{"id": "i1", "registration": None}],
        }
    )
    assert checkpoint_keys(s) == ["t:t1", "i:i1"]


def test_without_a_previous_record_nothing_is_news() -> None:
    assert checkpoint_news(None, session(checkpoints=3)) == []


def test_what_was_seen_is_not_news_again() -> None:
    s = session(checkpoints=3)
    assert checkpoint_news(checkpoint_keys(s), s) == []


def test_new_checkpoints_are_news_with_what_the_message_needs() -> None:
    before = session(checkpoints=1)
    after = session(checkpoints=2)
    news = checkpoint_news(checkpoint_keys(before), after)
    assert [field(i, "kind") for i in news] == ["training", "inference"]
    assert all(field(i, "event") == "new" for i in news)
    training = after.training_checkpoints[1]
    first = news[0]
    assert field(first, "id") == training.id
    assert field(first, "step") == training.step
    assert field(first, "registered") == training.registered_names()
    assert training.created_at is not None
    assert field(first, "created_at") == training.created_at.isoformat()


def test_a_registration_that_appears_later_is_news_once() -> None:
    unregistered = TrainingSession.model_validate(
        {"id": SID, "inference_checkpoints": [{"id": "i1", "step": "5"}]}
    )
    registered = TrainingSession.model_validate(
        {
            "id": SID,
            "inference_checkpoints": [
                {"id": "i1", "step": "5", "registration": {"model": {"id": "ml_1"}}}
            ],
        }
    )
    news = checkpoint_news(checkpoint_keys(unregistered), registered)
    assert [(field(i, "id"), field(i, "event")) for i in news] == [("i1", "registered")]
    assert field(news[0], "registered") == ["model ml_1"]
    assert checkpoint_news(checkpoint_keys(registered), registered) == []


def test_a_new_checkpoint_already_registered_is_one_item() -> None:
    after = TrainingSession.model_validate(
        {"id": SID, "training_checkpoints": [{"id": "t9", "registration": {"id": "ml_t"}}]}
    )
    news = checkpoint_news([], after)
    assert [(field(i, "id"), field(i, "event")) for i in news] == [("t9", "new")]


def test_old_shape_registrations_count_too() -> None:
    old = TrainingSession.model_validate(make_old_shape_session(SID, checkpoints=1))
    keys = checkpoint_keys(old)
    assert any(k.endswith(":registered") for k in keys)
    assert checkpoint_news(keys, old) == []
