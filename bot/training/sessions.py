"""Together's training sessions, tolerant of both API versions.

Beside the status and checkpoints, the newer shape (Together's SDK
`together.types.post_training`) adds display_name, base_model, metadata and
policy_state; a field either version lacks is None. `RawSession` is a session
as sent, read in two steps, so a poll that finds it unchanged parses little.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.training.checkpoints import InferenceCheckpoint, TrainingCheckpoint
from bot.training.status import TERMINAL, Status, status_of
from bot.training.tolerant import LenientDatetime, LenientInt, TolerantModel, lenient_int

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
MAX_SESSION_ID_LENGTH = 128
_SAFE_URL_RE = re.compile(r"^https?://[^\s<>|]+$")


def is_session_id(text: str) -> bool:
    """Ids are UUIDs or similar slugs: refuse anything that could change the URL path."""
    return bool(SESSION_ID_RE.fullmatch(text))


class SessionError(TolerantModel):
    code: str | None = None
    message: str | None = None
    occurred_at: LenientDatetime = None


class LoraConfig(TolerantModel):
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
        return lenient_int(value)


class PolicyState(TolerantModel):
    """Session-scoped policy versions: what the trainer produced versus what the
    generator applied, and whether a publish to the generator is in flight."""

    applied_weights_version: LenientInt = None
    target_weights_version: LenientInt = None
    trainer_step: LenientInt = None
    pending_publish: bool | None = None


class WandbEntry(BaseModel):
    """What Together's free-form `metadata.wandb` says of a session's W&B run. A part
    that is not text is as if absent: the metadata is whatever the trainer wrote."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    url: str | None = None
    entity: str | None = None
    project: str | None = None
    run_id: str | None = None

    @field_validator("url", "entity", "project", "run_id", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str | None:
        return value if isinstance(value, str) else None

    @classmethod
    def of(cls, metadata: Any) -> WandbEntry | None:
        """The entry a session's metadata holds under `wandb`, if it holds one."""
        match metadata:
            case {"wandb": dict() as entry}:
                return cls.model_validate(entry)
            case _:
                return None


class TrainingSession(TolerantModel):
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
    inference_checkpoints: list[InferenceCheckpoint] = Field(default_factory=list)
    training_checkpoints: list[TrainingCheckpoint] = Field(default_factory=list)
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
    def wandb_entry(self) -> WandbEntry | None:
        return WandbEntry.of(self.metadata)

    @property
    def wandb_url(self) -> str | None:
        """The W&B run: its `url`, else built from entity, project and run id."""
        wandb = self.wandb_entry
        if wandb is None:
            return None
        url = wandb.url
        if url is not None and _SAFE_URL_RE.fullmatch(url) and len(url) <= 3000:
            return url
        parts = (wandb.entity, wandb.project, wandb.run_id)
        if not all(p is not None and p.strip() for p in parts):
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
#: creation time and model resource, and whose it is and of which base model (what
#: follow rules match a listed session by). The rest waits for `RawSession.session`.
HEAD_FIELDS = (
    "id",
    "status",
    "step",
    "created_at",
    "model_resources_id",
    "created_by",
    "base_model",
)


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
