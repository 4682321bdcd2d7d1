"""The shapes Together's service sends, as the SDK's models hold them: training
sessions (`make_session`, and the older seed shape), model resources, and the error
object, with the status names and codes they use."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "DEFAULT_ERROR_CODE",
    "DEFAULT_PRICES",
    "KEY_OWNER",
    "LISTABLE_STATUSES",
    "RESOURCE_PREFIX",
    "RESOURCE_STATUSES",
    "SESSION_ERROR_CODES",
    "STATUS_PREFIX",
    "error_body",
    "full_resource_status",
    "full_status",
    "make_model_resource",
    "make_old_shape_session",
    "make_session",
    "session_error",
]

STATUS_PREFIX = "TRAINING_SESSION_STATUS_"
RESOURCE_PREFIX = "MODEL_RESOURCES_STATUS_"
_SHORT = {"UNSPECIFIED", "CREATING", "RUNNING", "STOPPED", "STOPPING", "ERROR", "EXPIRED"}
#: statuses the list endpoint filters on (SessionListParams: no UNSPECIFIED)
LISTABLE_STATUSES = frozenset(STATUS_PREFIX + s for s in _SHORT - {"UNSPECIFIED"})
RESOURCE_STATUSES = ("PENDING", "CREATING", "READY", "ERROR", "STOPPED", "STOPPING")
SESSION_ERROR_CODES = (
    "TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE",
    "TRAINING_SESSION_ERROR_CODE_RESOURCE_AT_CAPACITY",
    "TRAINING_SESSION_ERROR_CODE_TIMED_OUT",
    "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED",
)
DEFAULT_ERROR_CODE = "TRAINING_SESSION_ERROR_CODE_RESOURCE_AT_CAPACITY"
DEFAULT_ERROR_MESSAGE = (
    "The session could not start because the selected resource has no available capacity."
)
#: whom `created_by=me` means: the owner of the API key
KEY_OWNER = "user_123"
#: hourly price per GPU group (trainer or one generator replica) in `estimate-cost`
DEFAULT_PRICES = {"H100-80GB": 12.5, "B200-SXM": 21.0}


def full_status(status: str) -> str:
    """`RUNNING` -> `TRAINING_SESSION_STATUS_RUNNING`; anything else is kept verbatim."""
    return STATUS_PREFIX + status.upper() if status.upper() in _SHORT else status


def full_resource_status(status: str) -> str:
    """`READY` -> `MODEL_RESOURCES_STATUS_READY`; anything else is kept verbatim."""
    return RESOURCE_PREFIX + status.upper() if status.upper() in RESOURCE_STATUSES else status


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_iso(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


def error_body(
    message: str, code: str, type_: str = "invalid_request_error", param: str | None = None
) -> dict[str, Any]:
    """Together's error object: `{"error": {"message", "type", "param", "code"}}`."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def session_error(now: datetime, code: str = DEFAULT_ERROR_CODE) -> dict[str, Any]:
    """A SessionError: code, message and occurred_at are all required."""
    return {"code": code, "message": DEFAULT_ERROR_MESSAGE, "occurred_at": _iso(now)}


def make_session(
    id: str,
    status: str = "TRAINING_SESSION_STATUS_RUNNING",
    new_shape: bool = True,
    *,
    step: int | str | None = None,
    checkpoints: int = 1,
    drop: Iterable[str] = (),
    now: datetime | None = None,
    **over: Any,
) -> dict[str, Any]:
    """A session as Together's service sends it (the SDK's `Session`, field for field).

    `status` may be short ("RUNNING"). int64 fields (steps, policy versions, the LoRA
    seed) are JSON strings, as the service sends them; `step` defaults to "42" (pass an
    int or any string to test parsing). ERROR sessions get an `error` with a code.
    Inference checkpoints carry `registration{model, adapter}` (deployable), training
    ones a bare `{id, revision_id}` artifact (resumable training state). `checkpoints`
    sets how many of each kind; `over` overrides top-level keys (None gives JSON null)
    and `drop` removes keys. `new_shape=False` is `make_old_shape_session`.
    """
    if not new_shape:
        return make_old_shape_session(
            id, status, step=step, checkpoints=checkpoints, drop=drop, now=now, **over
        )
    now = now or datetime.now(UTC)
    created = now - timedelta(minutes=30)
    status = full_status(status)
    step = "42" if step is None else step
    inference: list[dict[str, Any]] = []
    training: list[dict[str, Any]] = []
    for i in range(checkpoints):
        at = _iso(created + timedelta(minutes=5 * (i + 1)))
        ck_step = str(10 * (i + 1))
        inference.append(
            {
                "id": _uid(id, "inference", str(i)),
                "created_at": at,
                "step": ck_step,
                "registration": {
                    "model": {"id": f"ml_{id[:6]}{i}", "revision_id": f"rv_{i:06d}"},
                    "adapter": {"id": f"ml_{id[:6]}a{i}", "revision_id": f"rv_a{i:05d}"},
                },
            }
        )
        training.append(
            {
                "id": _uid(id, "training", str(i)),
                "created_at": at,
                "step": ck_step,
                "registration": {"id": f"ml_{id[:6]}t{i}", "revision_id": f"rv_t{i:05d}"},
            }
        )
    session: dict[str, Any] = {
        "id": id,
        "display_name": f"grpo-{id[:8]}",
        "status": status,
        "base_model": "Qwen/Qwen3.5-4B",
        "model_resources_id": _uid(id, "model-resources"),
        "created_by": KEY_OWNER,
        "created_at": _iso(created),
        "updated_at": _iso(now),
        "step": step,
        "policy_state": {
            "applied_weights_version": step,
            "target_weights_version": step,
            "trainer_step": step,
            "pending_publish": False,
        },
        "lora_config": {
            "rank": 32,
            "alpha": 64,
            "dropout": 0.05,
            "seed": "1234",
            "train_unembed": True,
        },
        "metadata": {
            "wandb": {
                "entity": "example-org",
                "project": "grpo-gsm8k",
                "group": "gsm8k-sweep",
                "run_name": f"run-{id[:8]}",
                "run_id": id[:8],
                "url": f"https://wandb.ai/example-org/grpo-gsm8k/runs/{id[:8]}",
            }
        },
        "inference_checkpoints": inference,
        "training_checkpoints": training,
    }
    if status == STATUS_PREFIX + "ERROR":
        session["error"] = session_error(now)
    session.update(over)
    for key in drop:
        session.pop(key, None)
    return session


def make_old_shape_session(
    id: str,
    status: str = "TRAINING_SESSION_STATUS_RUNNING",
    *,
    step: int | str | None = None,
    checkpoints: int = 1,
    drop: Iterable[str] = (),
    now: datetime | None = None,
    **over: Any,
) -> dict[str, Any]:
    """The older seed page's shape, for backward-compatibility tests only.

    No display_name, base_model, metadata or policy_state; inference registrations are
    `{model_name, registered_at}`, training checkpoints have none; `step` only if given;
    an ERROR session's `error` has no code. Together's SDK does not accept it (the
    contract test checks that it stays this way)."""
    now = now or datetime.now(UTC)
    created = now - timedelta(minutes=30)
    status = full_status(status)
    session: dict[str, Any] = {"id": id, "status": status}
    if status == STATUS_PREFIX + "ERROR":
        session["error"] = {"message": DEFAULT_ERROR_MESSAGE, "occurred_at": _iso(now)}
    inference: list[dict[str, Any]] = []
    training: list[dict[str, Any]] = []
    for i in range(checkpoints):
        at = _iso(created + timedelta(minutes=5 * (i + 1)))
        inference.append(
            {
                "id": _uid(id, "inference", str(i)),
                "created_at": at,
                "registration": {
                    "model_name": f"user_123/Meta-Llama-3-8B-rl-step-{10 * (i + 1)}-20260216",
                    "registered_at": at,
                },
            }
        )
        training.append({"id": _uid(id, "training", str(i)), "created_at": at})
    session["inference_checkpoints"] = inference
    session["training_checkpoints"] = training
    session["created_at"] = _iso(created)
    session["updated_at"] = _iso(now)
    session["lora_config"] = {"rank": 32, "alpha": 64}
    session["model_resources_id"] = _uid(id, "model-resources")
    session["created_by"] = KEY_OWNER
    if step is not None:
        session["step"] = step
    session.update(over)
    for key in drop:
        session.pop(key, None)
    return session


def make_model_resource(
    id: str,
    status: str = "MODEL_RESOURCES_STATUS_READY",
    *,
    base_model: str = "Qwen/Qwen3.5-4B",
    created_by: str = KEY_OWNER,
    now: datetime | None = None,
    drop: Iterable[str] = (),
    **over: Any,
) -> dict[str, Any]:
    """A model resource as the SDK's `ModelResources` (status may be short: "READY").

    PENDING has a queue position, READY an `expires_at`, ERROR an `error` with a code."""
    now = now or datetime.now(UTC)
    status = full_resource_status(status)
    resource: dict[str, Any] = {
        "id": id,
        "base_model": base_model,
        "compute_config": {"num_generator_replicas": 1, "gpu_type": "H100-80GB"},
        "created_at": _iso(now - timedelta(hours=1)),
        "created_by": created_by,
        "inactive_timeout": 3600,
        "lora_enabled": True,
        "optimizer_config": {"adam": {}},
        "status": status,
        "status_details": {},
        "updated_at": _iso(now),
    }
    if status == RESOURCE_PREFIX + "PENDING":
        resource["status_details"] = {"queue_position": 3}
    if status == RESOURCE_PREFIX + "READY":
        resource["expires_at"] = _iso(now + timedelta(hours=1))
    if status == RESOURCE_PREFIX + "ERROR":
        resource["error"] = {
            "code": "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED",
            "message": "The resource's pods could not be provisioned.",
            "occurred_at": _iso(now),
        }
    resource.update(over)
    for key in drop:
        resource.pop(key, None)
    return resource
