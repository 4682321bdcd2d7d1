"""Together training-session models, tolerant of both API versions.

The older shape has `registration{model_name, registered_at}` on inference
checkpoints; the newer one has `registration{model{id, revision_id}, adapter{…}}`
plus display_name, base_model, metadata and policy_state. Unknown fields are
kept (`extra="allow"`) and unknown statuses are shown by name, never rejected.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)

STATUS_PREFIX = "TRAINING_SESSION_STATUS_"
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
MAX_SESSION_ID_LENGTH = 128


def is_session_id(text: str) -> bool:
    """Ids are UUIDs or similar slugs: refuse anything that could change the URL path."""
    return bool(SESSION_ID_RE.fullmatch(text))


class Status(StrEnum):
    CREATING = "CREATING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    ERROR = "ERROR"
    EXPIRED = "EXPIRED"
    UNSPECIFIED = "UNSPECIFIED"
    UNKNOWN = "UNKNOWN"


TERMINAL = frozenset({Status.STOPPED, Status.ERROR, Status.EXPIRED})


def short_status(raw: str | None) -> str:
    """`TRAINING_SESSION_STATUS_RUNNING` -> `RUNNING`; unknown names are kept as given."""
    if not raw:
        return "UNSPECIFIED"
    raw = raw.strip()
    return raw[len(STATUS_PREFIX) :] if raw.startswith(STATUS_PREFIX) else raw


def status_of(raw: str | None) -> Status:
    try:
        return Status(short_status(raw))
    except ValueError:
        return Status.UNKNOWN


def is_terminal(raw: str | None) -> bool:
    return status_of(raw) in TERMINAL


def _lenient_datetime(value: Any) -> Any:
    if value in ("", None):
        return None
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return value


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    @field_validator("*", mode="wrap")
    @classmethod
    def _tolerant(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        """A field of an unexpected type (a number for a name, a string for the
        rank) is dropped to its default rather than making the whole session
        unreadable; only a required field (the id) still refuses."""
        try:
            return handler(value)
        except ValidationError:
            field = cls.model_fields[str(info.field_name)]
            if field.is_required():
                raise
            return field.get_default(call_default_factory=True)


class SessionError(_Model):
    code: str | None = None
    message: str | None = None
    occurred_at: datetime | None = None

    _dt = field_validator("occurred_at", mode="before")(_lenient_datetime)


class LoraConfig(_Model):
    rank: int | None = None
    alpha: float | None = None
    dropout: float | None = None
    train_unembed: bool | None = None


class ModelRef(_Model):
    id: str | None = None
    revision_id: str | None = None


class InferenceRegistration(_Model):
    # older API
    model_name: str | None = None
    registered_at: datetime | None = None
    # newer API
    model: ModelRef | None = None
    adapter: ModelRef | None = None

    _dt = field_validator("registered_at", mode="before")(_lenient_datetime)


class Checkpoint(_Model):
    id: str = ""
    created_at: datetime | None = None
    step: int | None = None
    # inference checkpoints carry InferenceRegistration, training ones a ModelRef;
    # one permissive model covers both.
    registration: InferenceRegistration | None = None

    _dt = field_validator("created_at", mode="before")(_lenient_datetime)

    @field_validator("step", mode="before")
    @classmethod
    def _step(cls, value: Any) -> Any:
        return _lenient_int(value)

    @field_validator("registration", mode="before")
    @classmethod
    def _registration(cls, value: Any) -> Any:
        # Training checkpoints register as a bare {id, revision_id}.
        if isinstance(value, dict) and "id" in value and "model" not in value:
            return {"model": value}
        return value if isinstance(value, dict) or value is None else None

    def registered_names(self) -> list[str]:
        reg = self.registration
        if reg is None:
            return []
        names = []
        if reg.model_name:
            names.append(reg.model_name)
        for label, ref in (("model", reg.model), ("adapter", reg.adapter)):
            if ref is not None and ref.id:
                rev = f"@{ref.revision_id}" if ref.revision_id else ""
                names.append(f"{label} {ref.id}{rev}")
        return names


def _lenient_int(value: Any) -> Any:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str | float):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return None
    return None


class PolicyState(_Model):
    pending_publish: bool | None = None


class TrainingSession(_Model):
    id: str
    status: str = "TRAINING_SESSION_STATUS_UNSPECIFIED"
    display_name: str | None = None
    base_model: str | None = None
    model_resources_id: str | None = None
    created_by: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    resume_from_checkpoint_id: str | None = None
    step: int | None = None
    error: SessionError | None = None
    lora_config: LoraConfig | None = None
    inference_checkpoints: list[Checkpoint] = []
    training_checkpoints: list[Checkpoint] = []
    metadata: dict[str, Any] | None = None
    policy_state: PolicyState | None = None

    _dt = field_validator("created_at", "updated_at", mode="before")(_lenient_datetime)

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> Any:
        return value if isinstance(value, str) and value else "TRAINING_SESSION_STATUS_UNSPECIFIED"

    @field_validator("step", mode="before")
    @classmethod
    def _step(cls, value: Any) -> Any:
        return _lenient_int(value)

    @field_validator("inference_checkpoints", "training_checkpoints", mode="before")
    @classmethod
    def _list(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return []
        return [v for v in value if isinstance(v, dict)]

    @field_validator("error", "lora_config", "policy_state", "metadata", mode="before")
    @classmethod
    def _object_or_none(cls, value: Any) -> Any:
        return value if isinstance(value, dict) else None

    @property
    def status_enum(self) -> Status:
        return status_of(self.status)

    @property
    def short_status(self) -> str:
        return short_status(self.status)

    @property
    def terminal(self) -> bool:
        return self.status_enum in TERMINAL

    @property
    def name(self) -> str:
        return self.display_name or self.id

    @property
    def wandb_url(self) -> str | None:
        wandb = (self.metadata or {}).get("wandb")
        url = wandb.get("url") if isinstance(wandb, dict) else None
        if isinstance(url, str) and re.match(r"^https?://[^\s<>|]+$", url) and len(url) <= 3000:
            return url
        return None

    @property
    def error_key(self) -> str | None:
        """Identifies one error occurrence, so the same error is alerted once."""
        if self.error is None or not (self.error.message or self.error.code):
            return None
        when = self.error.occurred_at.isoformat() if self.error.occurred_at else ""
        return f"{self.error.code or ''}|{when}"
