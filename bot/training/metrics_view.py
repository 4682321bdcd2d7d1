"""`session_metrics.view`: what the bot last read of a session's W&B run for its
card, as one model written and read only through here.

Non-finite values cannot be JSON numbers, so a value that was NaN or infinite is
kept by name in `bad` and as a gap (None) in `latest` and `recent`. The column
(`bot.store.typed_json.PydanticJSON`) reads NULL or an unreadable value as nothing
read yet; a chart that no longer reads is dropped alone.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)

#: points of the card's sparkline per metric
SPARK_POINTS = 24
MAX_METRICS = 6


def finite_or_none(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def bad_name(value: float) -> str:
    """W&B's name for a value that is not finite."""
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


#: points kept of the card's chart (Slack's chart block draws at most 20)
CHART_POINTS = 20


class StoredChart(BaseModel):
    """The card's chart as last read, already reduced to what Slack draws:
    the first watched metric over its W&B steps (`metric`), or, without a run,
    the step over time as the polls saw it (`progress`: x in seconds since the
    epoch). Only finite numbers: JSON holds no others."""

    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False)

    kind: Literal["metric", "progress"]
    name: str = Field(max_length=128)
    points: list[tuple[float, float]] = Field(default_factory=list, max_length=CHART_POINTS)


class MetricsView(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    #: the latest value of each metric (`summaryMetrics`); None: not a finite number
    latest: dict[str, float | None] = Field(default_factory=dict)
    #: the latest values that were not finite, by W&B's name: NaN, Infinity, -Infinity
    latest_bad: dict[str, str] = Field(default_factory=dict)
    #: recent points per metric, oldest first, gaps as None
    recent: dict[str, list[float | None]] = Field(default_factory=dict)
    #: the last step W&B had logged, when known
    last_step: float | None = None
    #: metrics already told to have become NaN or infinite (told once each)
    told_bad: list[str] = Field(default_factory=list)
    #: why the last read failed, in words for the card (None: it did not)
    error: str | None = None
    #: the card's chart (None: nothing to chart yet)
    chart: StoredChart | None = None

    @field_validator("chart", mode="wrap")
    @classmethod
    def _chart(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> StoredChart | None:
        """A chart that no longer reads is no chart: the rest of the view stays."""
        try:
            chart: StoredChart | None = handler(value)
        except ValidationError:
            return None
        return chart

    #: reads that failed in a row, for the back-off of the next (0: the last did not)
    failures: int = 0

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
