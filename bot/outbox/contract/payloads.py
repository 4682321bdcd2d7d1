"""What an outbox row tells: its `Kind`, and one pydantic payload class per kind.

`Payload` is discriminated by `kind`. A row is read back only as its payload
class (`read_payload`, `OutboxMessage.typed_payload`), and the payload is
stored without its kind (the row's `kind` column holds it), so rows written
before the classes existed still load.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from bot.training.poll_progress import CardView
from bot.training.resources import ModelResource
from bot.training.snapshots import SessionSnapshot
from bot.training.transitions import CheckpointNews


class Kind(StrEnum):
    """What a row tells, and so how delivery sends it."""

    TRANSITION = "transition"  # a status change, told in the subscription's thread
    ROOT = "root"  # a status change not told (filtered, muted): the root card only
    CHECKPOINTS = "checkpoints"  # new checkpoints or registrations, in the thread
    ONCALL = "oncall"  # an error occurrence, to the on-call channel
    OPERATOR = "operator"  # an incident for whoever runs the bot
    DIGEST = "digest"  # a channel's daily digest
    PROGRESS = "progress"  # stalled, resumed or slow to start (in the thread, or on-call)
    IDLE = "idle"  # a READY model resource with no active session (on-call and threads)
    DM = "dm"  # one of those, told to a person in a direct message (their App Home switch)
    CREATOR_DM = "creator_dm"  # an error, stall or idle resource, DMed to the session's creator
    REPAGE = "repage"  # an on-call alert nobody acknowledged, paged once more
    CHART = "chart"  # a chart uploaded into the thread: the session ended, or stalled
    METRIC = "metric"  # a watched W&B metric became NaN or infinite (thread, on-call)
    RULE = "rule"  # a channel's metric rule fired (thread, on-call with `page`)
    BUDGET = "budget"  # a spend budget reached 80 % or 100 % (thread; on-call at 100 %)
    CARD = "card"  # the root card redrawn with what the watches see (steps/min, spend): paced
    CARD_NOW = "card_now"  # the root card redrawn for a change a person made: at once


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True)


class _StatusChange(_Payload):
    old_status: str
    new_status: str
    ended: bool = False  # the subscription ends with this message
    gone: bool = False  # Together no longer knows the session
    # The session as last seen; None only in very old rows.
    session: SessionSnapshot | None = None


class TransitionPayload(_StatusChange):
    kind: Literal[Kind.TRANSITION] = Kind.TRANSITION


class RootPayload(_StatusChange):
    kind: Literal[Kind.ROOT] = Kind.ROOT
    #: the card's view of the polls' progress (`watched_sessions.progress`); the
    #: field keeps its stored name, `watch`, so rows written before still read
    watch: CardView | None = None


class CardPayload(_Payload):
    """A root card owed a redraw, of what is stored when it is sent: the session's
    latest snapshot and the watches' view, read at the claim, so one row stands for
    every change since it was queued (`bot.outbox.queue.insert_outbox` keeps one
    waiting row per card). `session` and `watch` are what the writer saw, drawn only
    when nothing newer is stored."""

    kind: Literal[Kind.CARD, Kind.CARD_NOW] = Kind.CARD
    session: SessionSnapshot | None = None
    watch: CardView | None = None


class CheckpointsPayload(_Payload):
    kind: Literal[Kind.CHECKPOINTS] = Kind.CHECKPOINTS
    items: list[CheckpointNews] = []
    more: int = 0  # new checkpoints beyond the items (a burst): only counted
    session: SessionSnapshot | None = None


class OncallPayload(_Payload):
    kind: Literal[Kind.ONCALL] = Kind.ONCALL
    session: SessionSnapshot | None = None
    # The first subscription's thread, linked from the alert.
    thread_channel: str | None = None
    thread_ts: str | None = None


class OperatorPayload(_Payload):
    kind: Literal[Kind.OPERATOR] = Kind.OPERATOR
    title: str = "rl-bot"
    detail: str = ""


class DigestSession(BaseModel):
    session_id: str
    display_name: str | None
    status: str


class DigestChange(BaseModel):
    name: str
    old_status: str
    new_status: str


class RenderedDigest(BaseModel):
    """A digest queued before digests were data: its message as rendered then."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    text: str = ""
    blocks: list[Any] = []

    @field_validator("text", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return str(value) if value else ""

    @field_validator("blocks", mode="before")
    @classmethod
    def _blocks(cls, value: Any) -> list[Any]:
        return list(value) if isinstance(value, list | tuple) else []


class DigestPayload(_Payload):
    """What a digest says, rendered when it is sent like every other kind.
    `message` is the pre-rendered message of rows queued before that."""

    kind: Literal[Kind.DIGEST] = Kind.DIGEST
    day: str = ""
    sessions: list[DigestSession] = []
    changes: list[DigestChange] = []
    message: RenderedDigest | None = None


class ProgressPayload(_Payload):
    """A stall, its end, or a slow start (`bot.alerts.stall`), told once per
    episode: the dedupe key names the episode."""

    kind: Literal[Kind.PROGRESS] = Kind.PROGRESS
    event: Literal["stalled", "resumed", "creating"]
    step: int | None = None
    new_step: int | None = None  # resumed: the step it moved to
    since: datetime  # stalled/resumed: when the frozen step was first seen; creating: start
    seconds: float = 0.0  # how long it has been stalled / creating
    rate: float | None = None  # steps per minute the bot measured, for the card
    idles_out_at: datetime | None = None
    #: `idles_out_at` is the bot's estimate, not the resource's `expires_at`
    #: (rows queued before the spend watch could say were all estimates)
    idles_out_estimated: bool = True
    session: SessionSnapshot | None = None
    # On-call's page for a stall: mention, and link the first subscription's thread.
    page: bool = False
    thread_channel: str | None = None
    thread_ts: str | None = None


class IdlePayload(_Payload):
    """A model resource that is ready, and billing, with no CREATING or RUNNING
    session on it (`bot.alerts.idle`); told once per idle episode."""

    kind: Literal[Kind.IDLE] = Kind.IDLE
    resource: ModelResource
    idle_since: datetime
    currency: str | None = None
    price_per_hour: float | None = None
    # The sessions that used it (the newest few).
    sessions: list[SessionSnapshot] = []
    page: bool = False  # on-call's copy: with ONCALL_MENTION


class DmPayload(_Payload):
    """An error, an end, a stall or an idle resource of a person's session, told in a
    direct message (App Home: "Tell me about my sessions"): the row a thread gets, as
    its own payload, so the DM says the same thing the same way."""

    kind: Literal[Kind.DM] = Kind.DM
    about: Annotated[TransitionPayload | ProgressPayload | IdlePayload, Field(discriminator="kind")]


class CreatorDmPayload(_Payload):
    """A thread's error, stall or idle resource, DMed to the session's creator
    (`subscribe … dm=creator`), once per event however many threads chose it."""

    kind: Literal[Kind.CREATOR_DM] = Kind.CREATOR_DM
    event: Annotated[TransitionPayload | ProgressPayload | IdlePayload, Field(discriminator="kind")]
    # The thread it was told in, linked from the DM.
    thread_channel: str | None = None
    thread_ts: str | None = None


class ChartPayload(_Payload):
    """A chart owed to a thread (`bot.charts`): drawn and uploaded when sent,
    from the data of that moment. `end`: the session's final chart (metrics when
    its W&B run can be read, else progress); `stall`: the progress chart that
    shows the flat line beside the stall alert."""

    kind: Literal[Kind.CHART] = Kind.CHART
    reason: Literal["end", "stall", "rule"]
    session: SessionSnapshot | None = None
    #: `rule`: the metric the rule watches (`steps_per_min`: the progress chart)
    metrics: list[str] = []
    #: the thread's stall threshold in minutes (None: STALL_AFTER_MINUTES)
    stall_minutes: int | None = None


class MetricPayload(_Payload):
    """A watched metric that became NaN or infinite, told once per metric."""

    kind: Literal[Kind.METRIC] = Kind.METRIC
    metric: str
    #: "NaN", "Infinity" or "-Infinity"
    value: str
    step: float | None = None
    session: SessionSnapshot | None = None
    page: bool = False
    thread_channel: str | None = None
    thread_ts: str | None = None


class RulePayload(_Payload):
    """A metric rule's crossing, told once (the dedupe key names the rule, the
    session and when the crossing began)."""

    kind: Literal[Kind.RULE] = Kind.RULE
    metric: str
    op: str
    threshold: float
    hold_seconds: int = 0
    value: float
    step: float | None = None
    since: datetime
    held_seconds: float = 0.0
    session: SessionSnapshot | None = None
    page: bool = False
    thread_channel: str | None = None
    thread_ts: str | None = None


class BudgetPayload(_Payload):
    """A budget's level reached (80 or 100), with the forecast at the current rate."""

    kind: Literal[Kind.BUDGET] = Kind.BUDGET
    level: int
    spent: float
    amount: float
    daily: bool = False
    day: str | None = None  # a daily budget's local day (ISO)
    per_hour: float | None = None
    reaches_at: datetime | None = None
    currency: str = "USD"
    #: a daily budget's spend today in other currencies: named, never added
    others: dict[str, float] = Field(default_factory=dict)
    session: SessionSnapshot | None = None  # a session budget's session
    resource_id: str | None = None  # a session budget's model resource (Stop, Keep alive)
    page: bool = False
    thread_channel: str | None = None
    thread_ts: str | None = None


class RepagePayload(_Payload):
    """An on-call alert (its outbox row) nobody acknowledged within
    ONCALL_REPAGE_MINUTES: paged once more, in the alert's thread."""

    kind: Literal[Kind.REPAGE] = Kind.REPAGE
    alert_id: int
    minutes: float
    what: str = ""  # what the alert was about, plain (rendering escapes it)


Payload = Annotated[
    TransitionPayload
    | RootPayload
    | CardPayload
    | CheckpointsPayload
    | OncallPayload
    | OperatorPayload
    | DigestPayload
    | ProgressPayload
    | IdlePayload
    | DmPayload
    | CreatorDmPayload
    | RepagePayload
    | ChartPayload
    | MetricPayload
    | RulePayload
    | BudgetPayload,
    Field(discriminator="kind"),
]
_PAYLOAD: TypeAdapter[Payload] = TypeAdapter(Payload)


def read_payload(kind: str, payload: dict[str, Any]) -> Payload:
    """A stored payload as its class; ValueError for a kind that is none of ours."""
    return _PAYLOAD.validate_python({**payload, "kind": kind})
