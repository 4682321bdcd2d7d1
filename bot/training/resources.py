"""Together's model resources (the GPUs a session runs on) and their prices."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from bot.training.status import ResourceStatus, resource_status_of
from bot.training.tolerant import LenientDatetime, LenientInt, TolerantModel


class ComputeConfig(TolerantModel):
    """The GPUs provisioned: GPU type and generator replicas (0: trainer only)."""

    gpu_type: str | None = None
    num_generator_replicas: LenientInt = None


class StatusDetails(TolerantModel):
    """Set only while the resource waits for GPUs: its place in the queue."""

    queue_position: LenientInt = None


class ModelResourceError(TolerantModel):
    code: str | None = None
    message: str | None = None
    occurred_at: LenientDatetime = None


class ModelResource(TolerantModel):
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


class CostEstimate(TolerantModel):
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
