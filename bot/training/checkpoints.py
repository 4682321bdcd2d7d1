"""A session's checkpoints, in both of Together's API versions.

The older shape has `registration{model_name, registered_at}` on inference
checkpoints; the newer one (Together's SDK `together.types.post_training`) has
`registration{model{id, revision_id}, adapter{…}}` on inference checkpoints and
a bare `{id, revision_id}` artifact on training checkpoints.
"""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from bot.training.tolerant import LenientDatetime, LenientInt, TolerantModel


class ModelRef(TolerantModel):
    """A model-registry artifact: one revision of a model in Together's registry."""

    id: str | None = None
    revision_id: str | None = None

    @property
    def label(self) -> str | None:
        if not self.id:
            return None
        return f"{self.id}@{self.revision_id}" if self.revision_id else self.id


class InferenceRegistration(TolerantModel):
    # older API
    model_name: str | None = None
    registered_at: LenientDatetime = None
    # newer API: what can be deployed or downloaded
    model: ModelRef | None = None
    adapter: ModelRef | None = None


class Checkpoint(TolerantModel):
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


class CheckpointFile(TolerantModel):
    """One file of a checkpoint download (Together's `CheckpointFile`): its name,
    size (bytes, an int or a string) and presigned URL. The URL expires and
    grants access, so it is handed to the person who asked and kept nowhere."""

    filename: str
    size: int | str | None = None
    url: str

    def __repr__(self) -> str:  # a log line or a traceback must not carry the URL
        return f"CheckpointFile(filename={self.filename!r}, size={self.size!r})"

    __str__ = __repr__
