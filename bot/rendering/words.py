"""How the bot words what Together says: statuses, error codes, session
types, registrations, dates, session names, model resources and their GPUs,
durations, steps and money. Pure, and safe to put in mrkdwn."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from bot.rendering.text import ID_LIMIT, NAME_LIMIT, NONE, VALUE_LIMIT, code_span, inert
from bot.training.resources import ModelResource
from bot.training.sessions import TrainingSession
from bot.training.status import ResourceStatus, Status, short_status, status_of

_STATUS_WORDS = {
    Status.CREATING: "Creating",
    Status.RUNNING: "Running",
    Status.STOPPING: "Stopping",
    Status.STOPPED: "Stopped",
    Status.ERROR: "Error",
    Status.EXPIRED: "Expired",
    Status.UNSPECIFIED: "Unspecified",
}


_STATUS_EMOJI = {
    Status.CREATING: ":hourglass_flowing_sand:",
    Status.RUNNING: ":arrow_forward:",
    Status.STOPPING: ":double_vertical_bar:",
    Status.STOPPED: ":black_square_for_stop:",
    Status.ERROR: ":red_circle:",
    Status.EXPIRED: ":alarm_clock:",
    Status.UNSPECIFIED: ":grey_question:",
    Status.UNKNOWN: ":question:",
}


def status_words(raw_status: str) -> str:
    """Human word for a status; unknown ones are humanised from their raw name
    (so a new Together status shows up readably instead of being rejected)."""
    status = status_of(raw_status)
    if status in _STATUS_WORDS:
        return _STATUS_WORDS[status]
    human = short_status(raw_status).replace("_", " ").strip().lower().capitalize()
    return inert(human, 80, default="Unknown")


def status_emoji(raw_status: str) -> str:
    """A distinct emoji per status so changes are visible at a glance."""
    return _STATUS_EMOJI[status_of(raw_status)]


ERROR_CODE_PREFIX = "TRAINING_SESSION_ERROR_CODE_"


# Together's documented session error codes: a short phrase, and what to do next.
_ERROR_CODES: dict[str, tuple[str, str | None]] = {
    "RESOURCE_UNAVAILABLE": (
        "Model resource unavailable",
        "Check that the model resource is ready (it stops after its inactive timeout), "
        "then start a new session on a ready one.",
    ),
    "RESOURCE_AT_CAPACITY": (
        "Model resource at capacity",
        "Try again later or on another model resource; a LoRA training checkpoint can "
        "resume on another resource with compatible base-model weights.",
    ),
    "TIMED_OUT": (
        "Timed out",
        "Start a new session resuming from its latest training checkpoint to keep its progress.",
    ),
    "SESSION_FAILED": (
        "Session failed",
        "Read the message; to go on, start a new session resuming from its latest "
        "training checkpoint.",
    ),
}


def error_code_words(code: str | None) -> tuple[str, str | None]:
    """A phrase for an error code and, for documented codes, the next step; an
    unknown code is humanised from its name (`…_CODE_FOO_BAR` -> "Foo bar")."""
    short = (code or "").strip().removeprefix(ERROR_CODE_PREFIX)
    if short in _ERROR_CODES:
        return _ERROR_CODES[short]
    human = short.replace("_", " ").strip().lower().capitalize()
    return inert(human, 80, default="Unknown error"), None


def short_error_code(code: str) -> str:
    """The code without Together's long common prefix, in a code span."""
    return code_span(code.strip().removeprefix(ERROR_CODE_PREFIX) or code, 100)


_TYPE_PREFIXES = ("TRAINING_SESSION_TYPE_", "SESSION_TYPE_")


def session_type_words(raw: str | None) -> str | None:
    """`TRAINING_SESSION_TYPE_TRAINER_AND_GENERATOR` -> "Trainer and generator"."""
    if not raw or not raw.strip():
        return None
    short = raw.strip()
    for prefix in _TYPE_PREFIXES:
        short = short.removeprefix(prefix)
    human = short.replace("_", " ").strip().lower().capitalize()
    return inert(human, 80, default="") or None


def registration_words(kind: str, names: Sequence[str]) -> str | None:
    """What a checkpoint's registration is for. A training checkpoint's is a
    registry artifact of training state, to resume from; an inference
    checkpoint's is the model and/or adapter to deploy."""
    shown = [inert(n, VALUE_LIMIT) for n in names[:3]]
    if not shown:
        return None
    if kind == "training":
        return "resumable state " + ", ".join(shown)
    return "deployable as " + " and ".join(shown)


def timestamp(dt: datetime | None) -> float | None:
    if dt is None:
        return None
    try:
        return (dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)).timestamp()
    except (OverflowError, ValueError, OSError):
        return None


def slack_date(dt: datetime | None) -> str:
    """A `<!date>` token so each reader sees their own time zone; naive times
    are taken as UTC and the fallback is ISO 8601 in UTC."""
    if dt is None:
        return NONE
    try:
        aware = dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)
        utc = aware.astimezone(UTC)
        unix = int(utc.timestamp())
    except (OverflowError, ValueError, OSError):
        return inert(dt.isoformat(), 60)
    fallback = utc.replace(microsecond=0, tzinfo=None).isoformat() + "Z"
    return f"<!date^{unix}^{{date_short_pretty}} at {{time}}|{fallback}>"


def session_name(session: TrainingSession) -> str:
    """Display name, else id, else a placeholder: never blank."""
    name = inert(session.display_name, NAME_LIMIT, default="")
    return name or inert(session.id, ID_LIMIT, default="(unnamed session)")


def session_label(session: TrainingSession) -> str:
    """Name and id for one-line summaries (notifications show no blocks); the
    id alone when there is no display name."""
    name = inert(session.display_name, NAME_LIMIT, default="")
    return f"{name} ({inert(session.id, ID_LIMIT)})" if name else session_name(session)


# --- model resources, durations, steps and money ------------------------------------------

_RESOURCE_WORDS = {
    ResourceStatus.PENDING: ":hourglass: Pending (waiting for GPUs)",
    ResourceStatus.CREATING: ":hourglass_flowing_sand: Creating",
    ResourceStatus.READY: ":large_green_circle: Ready (billing)",
    ResourceStatus.ERROR: ":red_circle: Error",
    ResourceStatus.STOPPING: ":double_vertical_bar: Stopping",
    ResourceStatus.STOPPED: ":black_square_for_stop: Stopped",
}


def duration_words(delta: timedelta) -> str:
    """`15 min`, `2 h 5 min`, `3 d 4 h`: coarse, for people, never negative."""
    minutes = max(int(delta.total_seconds() // 60), 0)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def step_words(step: int | None) -> str:
    """`1,234`; an absent step is a dash."""
    if step is None:
        return NONE
    try:
        return f"{step:,}"
    except ValueError:  # more digits than Python will print
        return "(too large to show)"


def count_words(count: int, noun: str, plural: str | None = None) -> str:
    """`1 rule`, `0 rules`, `1,500 new sessions`: the noun agrees with the count."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def money_words(amount: float | None, currency: str | None) -> str | None:
    """`$12.50` for USD, `12.50 EUR` otherwise (the code escaped); whole units
    from 100 up so a spend estimate moves in readable steps."""
    if amount is None or amount != amount or amount < 0 or amount > 1e12:
        return None
    number = f"{amount:,.0f}" if amount >= 100 else f"{amount:,.2f}"
    code = (currency or "").strip().upper()
    if code in ("", "USD"):
        return f"${number}"
    return f"{number} {inert(code, 10)}"


def resource_status_words(resource: ModelResource) -> str:
    """An emoji and a word; an unknown status is humanised from its name."""
    known = _RESOURCE_WORDS.get(resource.status_enum)
    if known is not None:
        return known
    raw = resource.status.strip().removeprefix("MODEL_RESOURCES_STATUS_")
    human = raw.replace("_", " ").strip().lower().capitalize()
    return ":grey_question: " + inert(human, 80, default="Unknown")


def gpu_words(resource: ModelResource) -> str:
    """`H100-80GB · 2 generator replicas`; 0 replicas means trainer only."""
    parts = []
    if resource.gpu_type:
        parts.append(inert(resource.gpu_type, 40))
    replicas = resource.replicas
    if replicas is not None and 0 <= replicas < 10**6:
        parts.append(
            "trainer only"
            if replicas == 0
            else f"{replicas} generator replica{'s' if replicas != 1 else ''}"
        )
    return " · ".join(parts) or NONE
