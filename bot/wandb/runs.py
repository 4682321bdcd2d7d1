"""Which W&B run a session names, read from its `metadata.wandb`.

The session's client logs reward, loss and the rest to a W&B run and names it
in the session's metadata (`entity`, `project`, `run_id`; every field is
optional there). Only a run with all three can be read.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.training.sessions import WandbEntry

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


def run_of(wandb: WandbEntry | None) -> RunRef | None:
    """The run a session's W&B entry names, or None when it names none (or only in part)."""
    if wandb is None:
        return None
    parts = (wandb.entity, wandb.project, wandb.run_id)
    if not all(p is not None and p.strip() and len(p) <= MAX_PART for p in parts):
        return None
    entity, project, run_id = (str(p).strip() for p in parts)
    return RunRef(entity, project, run_id)
