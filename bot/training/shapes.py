"""Together training-session models, tolerant of both API versions.

The older shape has `registration{model_name, registered_at}` on inference
checkpoints; the newer one (Together's SDK `together.types.post_training`) has
`registration{model{id, revision_id}, adapter{…}}` on inference checkpoints, a
bare `{id, revision_id}` artifact on training checkpoints, plus display_name,
base_model, metadata and policy_state. int64 fields (steps, versions) arrive as
strings and are parsed as exact integers. Unknown fields are kept
(`extra="allow"`) and unknown statuses are shown by name, never rejected.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Annotated, Any
from urllib.parse import quote

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ModelWrapValidatorHandler,
    ValidationError,
    field_validator,
    model_validator,
)

STATUS_PREFIX = "TRAINING_SESSION_STATUS_"
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
MAX_SESSION_ID_LENGTH = 128
_SAFE_URL_RE = re.compile(r"^https?://[^\s<>|]+$")


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


#: A time as Together sends it; empty or unreadable is None.
LenientDatetime = Annotated[datetime | None, BeforeValidator(_lenient_datetime)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    @model_validator(mode="wrap")
    @classmethod
    def _tolerant(cls, value: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        """A field of an unexpected type (a number for a name, a string for the
        rank) is dropped to its default rather than making the whole session
        unreadable; only a required field (the id) still refuses.

        Validated whole first, and only on failure again without the fields that
        failed: one call per object, not one per field (a list page is thousands
        of fields)."""
        try:
            return handler(value)
        except ValidationError as exc:
            if not isinstance(value, dict):
                raise
            fields = cls.model_fields
            failed = {e["loc"][0] for e in exc.errors() if e["loc"]}
            optional = {n for n in failed if n in fields and not fields[n].is_required()}
            if not optional:
                raise
            return handler({k: v for k, v in value.items() if k not in optional})


class SessionError(_Model):
    code: str | None = None
    message: str | None = None
    occurred_at: LenientDatetime = None


_INT_RE = re.compile(r"[+-]?\d{1,30}")


def _lenient_int(value: Any) -> Any:
    """An int64 as Together sends it (a JSON string, or a number) -> an exact int.

    Never through `float`: `"12345678901234567"` must not become `…568`. A
    fractional value is cut toward zero; anything else unreadable is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value == value and abs(value) != float("inf") else None
    if isinstance(value, str):
        text = value.strip()
        if _INT_RE.fullmatch(text):
            return int(text)
        try:
            number = Decimal(text)
        except InvalidOperation:
            return None
        # The exponent bound keeps "1e999999999" from building a huge int.
        if not number.is_finite() or number.adjusted() > 30:
            return None
        return int(number)
    return None


#: An int64 as Together sends it (see `_lenient_int`).
LenientInt = Annotated[int | None, BeforeValidator(_lenient_int)]


class LoraConfig(_Model):
    rank: LenientInt = None
    alpha: LenientInt = None
    dropout: float | None = None
    # An int64 seed may come as a string; it is shown, never computed with.
    seed: int | str | None = None
    train_unembed: bool | None = None

    @field_validator("seed", mode="before")
    @classmethod
    def _seed(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip() or None
        return _lenient_int(value)


class ModelRef(_Model):
    """A model-registry artifact: one revision of a model in Together's registry."""

    id: str | None = None
    revision_id: str | None = None

    @property
    def label(self) -> str | None:
        if not self.id:
            return None
        return f"{self.id}@{self.revision_id}" if self.revision_id else self.id


class InferenceRegistration(_Model):
    # older API
    model_name: str | None = None
    registered_at: LenientDatetime = None
    # newer API: what can be deployed or downloaded
    model: ModelRef | None = None
    adapter: ModelRef | None = None


class Checkpoint(_Model):
    """What both checkpoint kinds share; see the two subclasses for `registration`."""

    id: str = ""
    created_at: LenientDatetime = None
    step: LenientInt = None

    def registered_names(self) -> list[str]:
        return []


class TrainingCheckpoint(Checkpoint):
    """Saved training state. Its registration is a model-registry artifact that
    holds the trainer's state, used to resume training, not to deploy."""

    registration: ModelRef | None = None

    @field_validator("registration", mode="before")
    @classmethod
    def _registration(cls, value: Any) -> Any:
        # Snapshots stored by earlier versions wrapped the artifact as {"model": {...}}.
        if isinstance(value, dict) and "id" not in value and isinstance(value.get("model"), dict):
            return value["model"]
        return value if isinstance(value, dict) else None

    def registered_names(self) -> list[str]:
        label = self.registration.label if self.registration is not None else None
        return [label] if label else []


class InferenceCheckpoint(Checkpoint):
    """Saved inference weights; registration names the deployable model and/or adapter."""

    registration: InferenceRegistration | None = None

    @field_validator("registration", mode="before")
    @classmethod
    def _registration(cls, value: Any) -> Any:
        return value if isinstance(value, dict) else None

    def registered_names(self) -> list[str]:
        reg = self.registration
        if reg is None:
            return []
        names = []
        if reg.model_name:
            names.append(reg.model_name)
        for kind, ref in (("model", reg.model), ("adapter", reg.adapter)):
            label = ref.label if ref is not None else None
            if label:
                names.append(f"{kind} {label}")
        return names


class PolicyState(_Model):
    """Session-scoped policy versions: what the trainer produced versus what the
    generator applied, and whether a publish to the generator is in flight."""

    applied_weights_version: LenientInt = None
    target_weights_version: LenientInt = None
    trainer_step: LenientInt = None
    pending_publish: bool | None = None


class TrainingSession(_Model):
    id: str
    status: str = "TRAINING_SESSION_STATUS_UNSPECIFIED"
    display_name: str | None = None
    base_model: str | None = None
    model_resources_id: str | None = None
    created_by: str | None = None
    created_at: LenientDatetime = None
    updated_at: LenientDatetime = None
    resume_from_checkpoint_id: str | None = None
    step: LenientInt = None
    error: SessionError | None = None
    lora_config: LoraConfig | None = None
    inference_checkpoints: list[InferenceCheckpoint] = []
    training_checkpoints: list[TrainingCheckpoint] = []
    metadata: dict[str, Any] | None = None
    policy_state: PolicyState | None = None
    # Not in Together's SDK model: trainer only, or trainer and generator, when sent.
    type: str | None = None

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> Any:
        return value if isinstance(value, str) and value else "TRAINING_SESSION_STATUS_UNSPECIFIED"

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
    def terminal(self) -> bool:
        return self.status_enum in TERMINAL

    @property
    def name(self) -> str:
        return self.display_name or self.id

    @property
    def wandb_url(self) -> str | None:
        """The W&B run: its `url`, else built from entity, project and run id."""
        wandb = (self.metadata or {}).get("wandb")
        if not isinstance(wandb, dict):
            return None
        url = wandb.get("url")
        if isinstance(url, str) and _SAFE_URL_RE.fullmatch(url) and len(url) <= 3000:
            return url
        parts = [wandb.get(key) for key in ("entity", "project", "run_id")]
        if not all(isinstance(p, str) and p.strip() for p in parts):
            return None
        entity, project, run_id = (quote(str(p).strip(), safe="") for p in parts)
        built = f"https://wandb.ai/{entity}/{project}/runs/{run_id}"
        return built if len(built) <= 3000 else None

    @property
    def error_key(self) -> str | None:
        """Identifies one error occurrence, so the same error is alerted once."""
        if self.error is None or not (self.error.message or self.error.code):
            return None
        when = self.error.occurred_at.isoformat() if self.error.occurred_at else ""
        return f"{self.error.code or ''}|{when}"


#: What every poll reads of a session at once (`RawSession.head`): its status, step,
#: creation time and model resource. The rest waits for `RawSession.session`.
HEAD_FIELDS = ("id", "status", "step", "created_at", "model_resources_id")


class RawSession:
    """A session as Together sent it, read in two steps: its `head` at once, the
    whole model only when asked for.

    `fingerprint` is a hash of the row as sent. The poller stores it with the
    state it built from the row, so a later poll whose row has the same
    fingerprint knows nothing moved without parsing or trimming the row again:
    a steady session costs its head (a list pass is thousands of rows a cycle)."""

    __slots__ = ("fingerprint", "head", "text")

    def __init__(self, head: TrainingSession, text: bytes) -> None:
        self.head = head
        self.text = text
        self.fingerprint = hashlib.blake2b(text, digest_size=16).hexdigest()

    @classmethod
    def of(cls, row: dict[str, Any]) -> RawSession:
        """A decoded JSON object as Together sent it; `ValidationError` when even
        its head does not parse (no usable id): then neither would the whole."""
        return cls(_head(row), json.dumps(row, separators=(",", ":")).encode())

    @classmethod
    def from_text(cls, text: bytes) -> RawSession:
        """One held as its `text` (a list pass holds rows so), read back."""
        return cls(_head(json.loads(text)), text)

    @property
    def id(self) -> str:
        return self.head.id

    def session(self) -> TrainingSession:
        """The whole model, as parsing the row at once would give it (the head's
        fields are validated alone, and the tolerant validators drop a bad field
        alone, so the head never disagrees with it)."""
        return session_of_text(self.text)


def _head(row: dict[str, Any]) -> TrainingSession:
    """A row's head fields alone, validated as the whole model validates them."""
    return TrainingSession.model_validate({k: row[k] for k in HEAD_FIELDS if k in row})


def session_of_text(text: bytes) -> TrainingSession:
    """A session held as JSON text, parsed as its row was when it came."""
    return TrainingSession.model_validate(json.loads(text))


# --- model resources (issue 12: spend watch) -------------------------------------------

RESOURCE_STATUS_PREFIX = "MODEL_RESOURCES_STATUS_"


class ResourceStatus(StrEnum):
    PENDING = "PENDING"
    CREATING = "CREATING"
    READY = "READY"
    ERROR = "ERROR"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    UNKNOWN = "UNKNOWN"


def short_resource_status(raw: str | None) -> str:
    """`MODEL_RESOURCES_STATUS_READY` -> `READY`; unknown names are kept as given."""
    if not raw or not raw.strip():
        return "UNKNOWN"
    raw = raw.strip()
    return raw.removeprefix(RESOURCE_STATUS_PREFIX)


def resource_status_of(raw: str | None) -> ResourceStatus:
    try:
        return ResourceStatus(short_resource_status(raw))
    except ValueError:
        return ResourceStatus.UNKNOWN


class ComputeConfig(_Model):
    """The GPUs provisioned: GPU type and generator replicas (0: trainer only)."""

    gpu_type: str | None = None
    num_generator_replicas: LenientInt = None


class StatusDetails(_Model):
    """Set only while the resource waits for GPUs: its place in the queue."""

    queue_position: LenientInt = None


class ModelResourceError(_Model):
    code: str | None = None
    message: str | None = None
    occurred_at: LenientDatetime = None


class ModelResource(_Model):
    """The GPUs a training session attaches to; it bills while READY.

    It stops after `inactive_timeout` seconds without activity (`expires_at`,
    refreshed about once a minute), and a stopped session leaves it running."""

    id: str
    status: str = "MODEL_RESOURCES_STATUS_UNSPECIFIED"
    base_model: str | None = None
    base_weights_ref: str | None = None
    compute_config: ComputeConfig | None = None
    status_details: StatusDetails | None = None
    created_by: str | None = None
    created_at: LenientDatetime = None
    updated_at: LenientDatetime = None
    expires_at: LenientDatetime = None
    inactive_timeout: LenientInt = None
    lora_enabled: bool | None = None
    optimizer_config: dict[str, Any] | None = None
    error: ModelResourceError | None = None

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> Any:
        return value if isinstance(value, str) and value else "MODEL_RESOURCES_STATUS_UNSPECIFIED"

    @field_validator("compute_config", "status_details", "optimizer_config", "error", mode="before")
    @classmethod
    def _object_or_none(cls, value: Any) -> Any:
        return value if isinstance(value, dict) else None

    @property
    def status_enum(self) -> ResourceStatus:
        return resource_status_of(self.status)

    @property
    def gpu_type(self) -> str | None:
        return self.compute_config.gpu_type if self.compute_config is not None else None

    @property
    def replicas(self) -> int | None:
        config = self.compute_config
        return config.num_generator_replicas if config is not None else None

    @property
    def queue_position(self) -> int | None:
        details = self.status_details
        return details.queue_position if details is not None else None

    def estimate_body(self) -> dict[str, Any]:
        """The resource's own fields as `POST /model-resources/estimate-cost` takes them."""
        body: dict[str, Any] = {"base_model": self.base_model or ""}
        config = {
            k: v
            for k, v in (("gpu_type", self.gpu_type), ("num_generator_replicas", self.replicas))
            if v is not None
        }
        if config:
            body["compute_config"] = config
        if self.lora_enabled is not None:
            body["lora_enabled"] = self.lora_enabled
        if self.inactive_timeout is not None:
            body["inactive_timeout"] = self.inactive_timeout
        if self.base_weights_ref:
            body["base_weights_ref"] = self.base_weights_ref
        if self.optimizer_config:
            body["optimizer_config"] = self.optimizer_config
        return body


class CostEstimate(_Model):
    """Together's on-demand price for a resource layout (an estimate, not a bill)."""

    currency: str = "USD"
    price_per_hour: float | None = None

    @field_validator("price_per_hour", mode="before")
    @classmethod
    def _price(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float | str):
            try:
                number = float(value)
            except ValueError:
                return None
            # Negative, NaN or infinite prices are garbage, not a bill.
            return number if number == number and 0 <= number < 1e9 else None
        return None
