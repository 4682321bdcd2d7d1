"""Which W&B run a session names, read from its `metadata.wandb`.

The session's client logs reward, loss and the rest to a W&B run and names it
in the session's metadata (`entity`, `project`, `run_id`; every field is
optional there). Only a run with all three can be read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: W&B's own limits on names are far lower; this keeps a hostile value out of a query
MAX_PART = 256


@dataclass(frozen=True)
class RunRef:
    entity: str
    project: str
    run_id: str

    @property
    def path(self) -> str:
        return f"{self.entity}/{self.project}/{self.run_id}"


def run_of(metadata: dict[str, Any] | None) -> RunRef | None:
    """The run a session's metadata names, or None when it names none (or only in part)."""
    wandb = (metadata or {}).get("wandb")
    if not isinstance(wandb, dict):
        return None
    parts = [wandb.get(key) for key in ("entity", "project", "run_id")]
    if not all(isinstance(p, str) and p.strip() and len(p) <= MAX_PART for p in parts):
        return None
    entity, project, run_id = (str(p).strip() for p in parts)
    return RunRef(entity, project, run_id)
