"""The subscribed-idle watch's look at one subscribed session, as its rule tests make
it: a stopped session whose resource was last read a moment ago."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bot.alerts.subscribed_idle import Candidate, candidate
from bot.simulated.together import make_model_resource
from bot.training.poll_progress import PollProgress
from bot.training.snapshots import SessionSnapshot

NOW = datetime(2026, 12, 1, 10, 0)  # naive UTC, as the database's times
RID = "7c3e4567-e89b-12d3-a456-426614174000"
FRESH = timedelta(seconds=120)


def spend(status: str = "READY", *, seen: datetime = NOW, rid: str = RID) -> dict[str, Any]:
    return {
        "resource_id": rid,
        "status": status,
        "resource": make_model_resource(rid, status),
        "price": {"currency": "USD", "price_per_hour": 25.0},
        "seen_at": seen.isoformat(),
    }


def look(status: str = "STOPPED", **progress: Any) -> Candidate | None:
    return candidate(
        "s1",
        last_status=f"TRAINING_SESSION_STATUS_{status}",
        progress=PollProgress.model_validate(progress),
        snapshot=SessionSnapshot(id="s1", model_resources_id=RID),
        now=NOW,
        fresh_for=FRESH,
    )
