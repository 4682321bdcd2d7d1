"""The demo's scripted world: where each session is at a given minute, that every
answer still has Together's shapes, and that what people do stays done.
Fast: the simulated services in-process, no bot."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from together.types.post_training import ModelResources, Session

from bot.demo.world import ENTITY, PROJECT, SCRIPTS, World, history
from bot.simulated import FakeTogether
from bot.simulated.wandb import FakeWandb
from tests.support.together_contract import fetch, strict

ID = {script.name: script.id for script in SCRIPTS}


@pytest.fixture
def world() -> Iterator[World]:
    with FakeTogether() as together, FakeWandb() as wandb:
        story = World(together, wandb, speed=0.0001)
        story.tick()
        yield story


def status(world: World, name: str) -> str:
    session = world.together.get(ID[name])
    assert session is not None, name
    return str(session["status"]).removeprefix("TRAINING_SESSION_STATUS_")


def test_the_story_moves_with_the_clock(world: World) -> None:
    assert status(world, "grpo-gsm8k-main") == "CREATING"
    assert world.together.get(ID["rm-pairwise-07"]) is None
    world.advance(0.3)
    assert status(world, "grpo-gsm8k-main") == "RUNNING"
    world.advance(0.6)
    assert status(world, "ppo-math-lr3e-5") == "ERROR"
    assert status(world, "rm-pairwise-07") == "RUNNING"
    stalled = world.together.get(ID["dpo-helpful-v2"])
    world.advance(2)
    assert world.together.get(ID["dpo-helpful-v2"]) == stalled
    assert status(world, "grpo-gsm8k-main") == "STOPPED"
    idle = world.together.resource("mr-sft-warmup-done")
    assert idle is not None and idle["status"].endswith("READY")


def test_every_session_and_resource_has_togethers_shapes_all_along(world: World) -> None:
    for minute in (0.3, 0.6, 1, 3):
        world.advance(minute - world.minute)
        for script in SCRIPTS:
            if world.together.get(script.id) is None:
                continue
            strict(Session, fetch(world.together, f"/rl/training-sessions/{script.id}"))
            resource = fetch(world.together, f"/rl/model-resources/mr-{script.name}")
            strict(ModelResources, resource)


def test_the_w_and_b_run_logs_reward_and_loss_and_then_a_nan(world: World) -> None:
    world.advance(1.5)
    rows = world.wandb.runs[(ENTITY, PROJECT, "code05")].rows
    assert {"_step", "reward", "loss"} <= set(rows[0])
    assert rows[-1]["reward"] > rows[0]["reward"]
    assert any(math.isnan(row["loss"]) for row in rows)
    assert not any(
        math.isnan(row["loss"]) for row in world.wandb.runs[(ENTITY, PROJECT, "main01")].rows
    )


def test_a_stopped_session_leaves_the_script_and_winds_down(world: World) -> None:
    world.advance(0.1)
    stopped = fetch(
        world.together, f"/rl/training-sessions/{ID['dpo-helpful-v2']}/stop", method="POST"
    )
    assert stopped.status_code == 200
    world.advance(0.5)
    assert status(world, "dpo-helpful-v2") == "STOPPING"
    world.advance(1)
    assert status(world, "dpo-helpful-v2") == "STOPPED"
    world.advance(10)
    assert status(world, "dpo-helpful-v2") == "STOPPED"


@pytest.mark.parametrize("minutes", [math.inf, math.nan, 1e300, 61, -1])
def test_a_jump_out_of_bounds_is_refused_and_moves_nothing(world: World, minutes: float) -> None:
    before = world.minute
    with pytest.raises(ValueError):
        world.advance(minutes)
    assert world.minute < before + 0.01


@pytest.mark.parametrize("speed", [math.inf, math.nan, 0, -1, 101])
def test_a_speed_out_of_bounds_is_refused(world: World, speed: float) -> None:
    with pytest.raises(ValueError):
        world.set_speed(speed)
    assert world.speed == 0.0001


def test_a_runs_history_stays_small_however_long_the_demo_runs() -> None:
    """The NaN session runs for ever at 40 steps a minute, and its run's whole history
    was rebuilt under the world's lock at every step: ten hours at the top speed
    (step 2.4 million) made 480,001 rows, 0.8 s a tick here, and the simulated W&B
    served them all. Like W&B's own sampled history, the rows are spread out."""
    script = next(s for s in SCRIPTS if s.run == "code05")
    assert [row["_step"] for row in history(script, 500)] == list(range(0, 501, 5))
    for step in (5_000, 2_400_000):
        rows = history(script, step)
        assert len(rows) <= 1_001, (step, len(rows))
        assert rows[0]["_step"] == 0 and rows[-1]["_step"] > step * 0.99
        assert any(math.isnan(row["loss"]) for row in rows)
