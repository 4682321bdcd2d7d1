"""Together's statuses: a session's and a model resource's, by their short names.

Together sends them prefixed (`TRAINING_SESSION_STATUS_RUNNING`,
`MODEL_RESOURCES_STATUS_READY`); the bot speaks of them without it. A status
it does not know is shown by name and counts as UNKNOWN, never rejected.
"""

from __future__ import annotations

from enum import StrEnum

STATUS_PREFIX = "TRAINING_SESSION_STATUS_"


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
