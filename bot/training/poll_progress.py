"""The `watched_sessions.progress` column: what the poller's watches keep of a
session between polls, as one model written and read only here.

The stall watch's view of the step (`step`, `since`, `running`, `rate`,
`anchored`, `seen_at`), the spend watch's last read of the session's model
resource (`spend`) and where the subscribed-idle watch of that resource stands
(`idle_check`). A root card's redraw carries the same view with the
subscription's `target=` and its ETA (`CardView`, in the outbox payload).

Reading never raises: an unreadable section reads as missing, as an unreadable
column was always "a first look" (the step's fields go together: one of them
unreadable and the step is unknown). `dump` writes the JSON the column has
always held (the step as a string: an int64; `version` only once it is not 1),
so rows written before the model read the same and a steady poll writes the
same. The resource and its price stay as Together's JSON: a steady poll copies
them without parsing, and `SpendRead.model_resource` / `cost` parse them where
they are shown.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    StrictInt,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from bot.training.resources import CostEstimate, ModelResource
from bot.training.rules import Progress

_M = TypeVar("_M", ModelResource, CostEstimate)


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when is not None else None


class _Stored(BaseModel):
    """A section of the column: read tolerantly, a field that does not read
    falls back to its default; something not an object is no section at all."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    #: fields that are read together: one unreadable drops them all
    _together: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def _shape(cls, value: Any) -> Any:
        """What is validated of `value` (a section must be an object)."""
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _tolerant(cls, value: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        value = cls._shape(value)
        try:
            return handler(value)
        except ValidationError as exc:
            if not isinstance(value, dict):
                raise
            failed = {e["loc"][0] for e in exc.errors() if e["loc"]}
            if failed & cls._together:
                failed |= cls._together
            return handler({k: v for k, v in value.items() if k not in failed})


class _QueueDetails(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    queue_position: Any = None


class ResourceFacts(BaseModel):
    """The few fields of Together's resource (as `SpendRead` keeps it) that the
    card's key and the stall watch read, as Together sent them: compared and
    shown, never computed with, so not parsed as the whole `ModelResource`."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    compute_config: Any = None
    status_details: _QueueDetails | None = None
    expires_at: Any = None
    inactive_timeout: Any = None

    @field_validator("status_details", mode="before")
    @classmethod
    def _object_or_none(cls, value: Any) -> Any:
        return value if isinstance(value, dict) else None

    @property
    def queue_position(self) -> Any:
        return self.status_details.queue_position if self.status_details is not None else None


class SpendRead(_Stored):
    """The spend watch's last read of the session's model resource: the resource
    and its price as Together sent them, and how long the bot has seen it READY."""

    resource_id: str | None = None
    #: the resource's status (`ResourceStatus` value) at this read
    status: str | None = None
    #: the `ModelResource` as Together sent it (`model_dump(mode="json", exclude_none=True)`)
    resource: dict[str, Any] | None = None
    #: the `CostEstimate` (`model_dump(mode="json")`), None when none was read
    price: dict[str, Any] | None = None
    ready_seconds: float | None = None
    seen_at: datetime | None = None

    @classmethod
    def of(
        cls,
        resource: ModelResource,
        price: CostEstimate | None,
        *,
        ready_seconds: float,
        seen_at: datetime,
    ) -> SpendRead:
        """A read just made."""
        return cls(
            resource_id=resource.id,
            status=resource.status_enum.value,
            resource=resource.model_dump(mode="json", exclude_none=True),
            price=price.model_dump(mode="json") if price is not None else None,
            ready_seconds=ready_seconds,
            seen_at=seen_at,
        )

    def facts(self) -> ResourceFacts:
        """What the card and the stall watch read of the resource (empty: none kept)."""
        return ResourceFacts.model_validate(self.resource or {})

    def model_resource(self) -> ModelResource | None:
        """The resource, parsed; None when it is missing or no longer validates."""
        return _parsed(ModelResource, self.resource)

    def cost(self) -> CostEstimate | None:
        """The price, parsed; None when it is missing or no longer validates."""
        return _parsed(CostEstimate, self.price)

    @model_serializer
    def dump(self) -> dict[str, Any]:
        return {
            "resource_id": self.resource_id,
            "status": self.status,
            "resource": self.resource,
            "price": self.price,
            "ready_seconds": self.ready_seconds,
            "seen_at": _iso(self.seen_at),
        }


class IdleCheck(_Stored):
    """Where the subscribed-idle watch of the session's resource stands, once the
    session ended: over (`done`: alerted, busy, gone, refused, stopped, error),
    waiting for a status (`waiting`), or to be looked at again (`check_at`),
    later after each read that failed in a row (`failures`)."""

    resource_id: str | None = None
    done: str | None = None
    waiting: str | None = None
    check_at: datetime | None = None
    #: since when the check found the resource idle
    idle_since: datetime | None = None
    #: reads of the resource that failed in a row (a passing reason), for the back-off
    failures: StrictInt = 0

    @model_serializer
    def dump(self) -> dict[str, Any]:
        fields = {
            "resource_id": self.resource_id,
            "done": self.done,
            "waiting": self.waiting,
            "check_at": _iso(self.check_at),
            "idle_since": _iso(self.idle_since),
            "failures": self.failures or None,
        }
        return {k: v for k, v in fields.items() if v is not None}


class PollProgress(_Stored):
    """The column. Its step fields are known only together (`progress`)."""

    _together: ClassVar[frozenset[str]] = frozenset({"step", "since", "seen_at"})

    #: the column's shape; absent in the JSON while it is 1
    version: int = 1
    step: int | None = None
    #: when the step was first seen at its value (or the session (re)entered RUNNING)
    since: datetime | None = None
    running: bool = False
    #: steps per minute as measured
    rate: float | None = None
    anchored: bool = False
    #: when the poll that wrote this saw the session
    seen_at: datetime | None = None
    spend: SpendRead | None = None
    idle_check: IdleCheck | None = None
    #: how many times the card was redrawn for what it shows of the watch: each
    #: redraw's key carries its number, so a value that comes back is drawn again
    redraws: int = Field(0, ge=0)

    @classmethod
    def _shape(cls, value: Any) -> Any:
        """The whole column: anything but an object reads as empty (a first look)."""
        return value if isinstance(value, dict | cls) else {}

    @classmethod
    def seen(
        cls, progress: Progress, seen_at: datetime, *, spend: SpendRead | None = None
    ) -> PollProgress:
        """What a poll just measured."""
        return PollProgress(
            step=progress.step,
            since=progress.since,
            running=progress.running,
            rate=progress.rate,
            anchored=progress.anchored,
            seen_at=seen_at,
            spend=spend,
        )

    def progress(self) -> Progress | None:
        """The step as the polls saw it; None before the first look."""
        if self.since is None or self.seen_at is None:
            return None
        return Progress(
            step=self.step,
            since=self.since,
            running=self.running,
            rate=self.rate,
            anchored=self.anchored,
        )

    def _fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.version == 1 else {"version": self.version}
        if self.since is not None and self.seen_at is not None:
            out |= {
                "step": None if self.step is None else str(self.step),
                "since": self.since.isoformat(),
                "running": self.running,
                "rate": self.rate,
                "anchored": self.anchored,
                "seen_at": self.seen_at.isoformat(),
            }
        if self.spend is not None:
            out["spend"] = self.spend.dump()
        if self.idle_check is not None:
            out["idle_check"] = self.idle_check.dump()
        if self.redraws:
            out["redraws"] = self.redraws
        return out

    @model_serializer
    def dump(self) -> dict[str, Any]:
        """The column's JSON."""
        return self._fields()


class CardView(PollProgress):
    """What a root card's redraw shows of the progress: the column, and with a
    subscription's own `target=` that target and the ETA worked out for it."""

    target: StrictInt | None = None
    eta: datetime | None = None
    #: the channel's budget on the session (`budget <id> $…`): "≈ $X of $Y"
    budget: float | None = None

    @classmethod
    def of(
        cls,
        progress: PollProgress,
        *,
        target: int | None = None,
        eta: datetime | None = None,
        budget: float | None = None,
    ) -> CardView:
        """The column's view for one card."""
        return cls(**dict(progress), target=target, eta=eta, budget=budget)

    def _fields(self) -> dict[str, Any]:
        out = super()._fields()
        if self.target is not None:
            out |= {"target": self.target, "eta": _iso(self.eta)}
        if self.budget is not None:
            out["budget"] = self.budget
        return out


def _parsed(model: type[_M], data: dict[str, Any] | None) -> _M | None:
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None
