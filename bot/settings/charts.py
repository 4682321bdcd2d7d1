"""The settings of charts and of Weights & Biases, as a base class of `Settings`.

They live apart from `bot.settings.model` so that the settings class stays one
readable page; `Settings` inherits them, so they are read, documented and
checked like every other setting (same tiers, same `docs/configuration.md`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, SecretStr, field_validator
from pydantic_settings import NoDecode

from bot.settings.tiers import tuning, user

#: what a metric name may be: W&B keys are free text, but a name goes into a GraphQL
#: variable and a message, so it is kept short
MAX_METRIC_NAME = 128
MAX_METRICS = 6


def metric_names(value: object) -> tuple[str, ...]:
    """A comma- or space-separated list of metric names, deduplicated, bounded."""
    if isinstance(value, str):
        items: list[object] = list(value.replace(",", " ").split())
    elif isinstance(value, list | tuple | set | frozenset):
        items = list(value)
    else:
        items = []
    names: list[str] = []
    for item in items:
        name = str(item).strip()[:MAX_METRIC_NAME]
        if name and name not in names:
            names.append(name)
    return tuple(names[:MAX_METRICS])


class ChartSettings(BaseModel):
    """W&B access and the charts' costs (see docs/alerts.md#charts)."""

    wandb_api_key: SecretStr | None = user(
        None,
        "Weights & Biases API key: charts and the card read a session's run (`metadata.wandb`) "
        "with it; unset, charts show only the bot's own step progress.",
    )
    wandb_base_url: str = tuning(
        "https://api.wandb.ai",
        "W&B API base URL (a self-hosted W&B server's own); the key goes only there.",
    )
    wandb_metrics: Annotated[tuple[str, ...], NoDecode] = tuning(
        ("reward", "loss"),
        "The W&B metrics charted and shown on the card, comma-separated (a command may name others).",
    )
    wandb_refresh_seconds: float = tuning(
        300.0,
        "The card's metric values are read from W&B at most once this often per watched session.",
        ge=30,
        le=24 * 3600,
    )
    wandb_requests_per_minute: float = tuning(
        60.0,
        "What the whole process may send to W&B a minute; a chart beyond it says so.",
        gt=0,
    )
    oncall_on_metric: bool = user(
        False, "Also tell ONCALL_CHANNEL when a watched metric becomes NaN or infinite."
    )

    @field_validator("wandb_metrics", mode="before")
    @classmethod
    def _metrics(cls, value: object) -> object:
        return metric_names(value)

    @field_validator("wandb_api_key", mode="before")
    @classmethod
    def _blank_key(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def wandb_key(self) -> str | None:
        """The W&B key, or None when charts have only the bot's own progress."""
        if self.wandb_api_key is None:
            return None
        key = self.wandb_api_key.get_secret_value().strip()
        return key or None
