"""The demo's scripted world: six training sessions, their model resources and W&B runs,
each a function of the story's minute, written into the simulated Together and W&B.

Scripted as functions of time rather than as a list of events, so moving the story
forward ("+1 min", a faster `--speed`) lands every session exactly where the script
says it is then. Only what changed is written, so what people do (Stop, Keep alive)
stays done: a stopped session leaves the script and winds down by itself.

The story's minute is a real minute at speed 1, so the rates on the cards and the
bot's timers (stall, idle, spend, budgets), which run on real time, agree with it.
A jump or a faster speed moves only the sessions: the bot's timers still count real
minutes, and the page shows both.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.simulated.together import FakeTogether, make_session
from bot.simulated.wandb import FakeRun, FakeWandb

#: story minutes a real second moves at speed 1: real time
SIM_MINUTES_PER_SECOND = 1 / 60
#: the fastest the story may move (a real minute, a hundred of the story's)
MAX_SPEED = 100.0
#: the longest one jump ahead: a bigger one would write hours of history at once
MAX_STEP_MINUTES = 60.0
#: the most rows a simulated W&B run's history holds
MAX_HISTORY_ROWS = 1000
#: the session ids' common head (valid UUIDs, easy to tell apart by their last digits)
_ID = "6d1e7c3a-0b5f-4c2e-9a7d-00000000000"
ENTITY, PROJECT = "demo-org", "grpo-gsm8k"
#: the Together owners of the sessions: the key's owner is "you" in Slack
YOU_OWNER, ONCALL_OWNER = "user_123", "user_456"


@dataclass(frozen=True)
class Shape:
    """What a session is at some minute: status, step, checkpoints, and its run's rows."""

    status: str
    step: int
    checkpoints: int
    resource: str = "READY"


@dataclass(frozen=True)
class Script:
    """One session of the story: its names, and its shape as a function of the minute."""

    id: str
    name: str
    owner: str
    model: str
    shape: Callable[[float], Shape | None]
    run: str | None = None
    nan_from_step: int | None = None


def _steps(t: float, start: float, per_minute: float, until: float | None = None) -> int:
    end = t if until is None else min(t, until)
    return max(0, int((end - start) * per_minute))


def _main(t: float) -> Shape:
    """CREATING, then RUNNING with a checkpoint of each kind every 25 steps, then done."""
    if t < 0.2:
        return Shape("CREATING", 0, 0, resource="CREATING")
    step = _steps(t, 0.2, 50, until=2.4)
    if t >= 2.4:
        return Shape("STOPPED", step, step // 25, resource="STOPPED")
    return Shape("RUNNING", step, step // 25)


def _failing(t: float) -> Shape:
    step = 40 + _steps(t, 0, 40, until=0.8)
    if t >= 0.8:
        return Shape("ERROR", step, 1, resource="STOPPED")
    return Shape("RUNNING", step, 1)


def _stalling(t: float) -> Shape:
    return Shape("RUNNING", 120 + _steps(t, 0, 30, until=0.4), 4)


def _idle(t: float) -> Shape:
    """Finished before the demo began; its resource stays READY, and billed."""
    return Shape("STOPPED", 300, 6)


def _nan(t: float) -> Shape:
    return Shape("RUNNING", 60 + _steps(t, 0, 40), 2 + _steps(t, 0, 40) // 40)


def _late(t: float) -> Shape | None:
    """Somebody else's session, created half a minute in."""
    if t < 0.5:
        return None
    if t < 0.7:
        return Shape("CREATING", 0, 0, resource="CREATING")
    return Shape("RUNNING", _steps(t, 0.7, 60), _steps(t, 0.7, 60) // 30)


SCRIPTS = (
    Script(_ID + "1", "grpo-gsm8k-main", YOU_OWNER, "Qwen/Qwen3.5-4B", _main, run="main01"),
    Script(_ID + "2", "ppo-math-lr3e-5", YOU_OWNER, "Qwen/Qwen3.5-4B", _failing),
    Script(_ID + "3", "dpo-helpful-v2", ONCALL_OWNER, "Qwen/Qwen3.5-4B", _stalling),
    Script(_ID + "4", "sft-warmup-done", YOU_OWNER, "Qwen/Qwen3.5-4B", _idle),
    Script(
        _ID + "5",
        "grpo-code-r1",
        YOU_OWNER,
        "Qwen/Qwen3.5-4B",
        _nan,
        run="code05",
        nan_from_step=100,
    ),
    Script(_ID + "6", "rm-pairwise-07", ONCALL_OWNER, "Qwen/Qwen3.5-4B", _late),
)


def history(script: Script, step: int) -> list[dict[str, Any]]:
    """The run's logged rows up to `step`: reward climbing, loss falling, and past
    `nan_from_step` a NaN loss (as a diverging run logs it). Every 5th step, spread
    out past `MAX_HISTORY_ROWS` rows as W&B samples a long history: a session runs for
    ever, and its whole history is written again at each step, under the world's lock."""
    stride = max(5, math.ceil(step / MAX_HISTORY_ROWS / 5) * 5)
    rows = []
    for s in range(0, step + 1, stride):
        wobble = 0.03 * math.sin(s / 3.0)
        loss = 1.3 * math.exp(-s / 60) + 0.12 + wobble / 2
        if script.nan_from_step is not None and s >= script.nan_from_step:
            loss = math.nan
        rows.append(
            {
                "_step": s,
                "reward": round(0.15 + 0.7 * (1 - math.exp(-s / 45)) + wobble, 4),
                "loss": loss,
            }
        )
    return rows


class World:
    """The simulated clock and what it has written. Thread-safe: the page's controls
    and the ticking loop both move it."""

    def __init__(
        self,
        together: FakeTogether,
        wandb: FakeWandb,
        *,
        speed: float = 1.0,
        runs_url: str = f"https://wandb.ai/{ENTITY}/{PROJECT}/runs",
    ) -> None:
        self.together = together
        self.wandb = wandb
        self.speed = speed
        self.runs_url = runs_url
        self.minute = 0.0
        self._lock = threading.Lock()
        self._written: dict[str, tuple[Any, ...]] = {}
        self._resources: dict[str, str] = {}
        self._changed_at: dict[str, datetime] = {}
        self._stopped: dict[str, float] = {}
        self._started = datetime.now(UTC).replace(microsecond=0)
        self._last = self._began = time.monotonic()

    @property
    def elapsed(self) -> float:
        """Real seconds since the world began: the clock the bot's timers keep."""
        return time.monotonic() - self._began

    def tick(self) -> None:
        """Move the clock by the real time since the last tick, at the current speed."""
        with self._lock:
            self._move()
            self._apply()

    def advance(self, minutes: float) -> None:
        """Move the story (only the sessions) ahead by `minutes`."""
        if not 0 <= minutes <= MAX_STEP_MINUTES:  # also refuses NaN
            raise ValueError(f"a step is 0 to {MAX_STEP_MINUTES:g} minutes")
        with self._lock:
            self._move()
            self.minute += minutes
            self._apply()

    def set_speed(self, speed: float) -> None:
        if not 0 < speed <= MAX_SPEED:
            raise ValueError(f"the speed is above 0 and at most {MAX_SPEED:g}")
        with self._lock:
            self._move()
            self.speed = speed

    def _move(self) -> None:
        now = time.monotonic()
        self.minute += (now - self._last) * SIM_MINUTES_PER_SECOND * self.speed
        self._last = now

    def _apply(self) -> None:
        for script in SCRIPTS:
            shape = script.shape(self.minute)
            if shape is None:
                continue
            if script.id in self.together.stop_requests:
                self._wind_down(script.id)
                continue
            key = (shape.status, shape.step, shape.checkpoints)
            if self._written.get(script.id) != key:
                self._changed_at[script.id] = datetime.now(UTC).replace(microsecond=0)
                self.together.put(self._session(script, shape))
                self._written[script.id] = key
                if script.run is not None:
                    rows = history(script, shape.step)
                    self.wandb.add_run(ENTITY, PROJECT, script.run, FakeRun(rows=rows))
            self._resource(script, shape)

    def _wind_down(self, session_id: str) -> None:
        """Stopped by a person: Together's stop took over; a minute later it is STOPPED."""
        since = self._stopped.setdefault(session_id, self.minute)
        current = self.together.get(session_id) or {}
        if self.minute - since >= 1 and str(current.get("status", "")).endswith("STOPPING"):
            self.together.set_status(session_id, "STOPPED")

    def _resource(self, script: Script, shape: Shape) -> None:
        rid = f"mr-{script.name}"
        if self._resources.get(rid) == shape.resource:
            return
        if rid not in self._resources:
            self.together.add_resource(
                rid, shape.resource, base_model=script.model, created_by=script.owner
            )
        elif not any(r == rid for r, _ in self.together.resource_stop_requests):
            self.together.set_resource(rid, shape.resource)
        self._resources[rid] = shape.resource

    def _session(self, script: Script, shape: Shape) -> dict[str, Any]:
        changed = self._changed_at[script.id]
        session = make_session(
            script.id,
            shape.status,
            step=str(shape.step),
            checkpoints=shape.checkpoints,
            now=changed,
            display_name=script.name,
            base_model=script.model,
            created_by=script.owner,
            model_resources_id=f"mr-{script.name}",
            created_at=_iso(self._created(script)),
        )
        for kind in ("inference_checkpoints", "training_checkpoints"):
            for i, checkpoint in enumerate(session[kind]):
                checkpoint["step"] = str(min(shape.step, 25 * (i + 1)))
        wandb = session["metadata"]["wandb"]
        if script.run is None:
            session["metadata"] = {}
        else:
            wandb.update(
                entity=ENTITY,
                project=PROJECT,
                run_id=script.run,
                run_name=script.name,
                url=f"{self.runs_url}/{script.run}",
            )
        return session

    def _created(self, script: Script) -> datetime:
        first = next((m / 10 for m in range(600) if script.shape(m / 10) is not None), 0.0)
        return self._started + timedelta(minutes=first) - timedelta(minutes=20 if first == 0 else 0)


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
