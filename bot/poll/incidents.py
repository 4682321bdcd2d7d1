"""Operator incidents: Together rejecting the bot's key, or unreachable for too
long. One alert when an incident opens, one "Recovered" when it closes, each
written to the outbox in the poll's own transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from bot.outbox.contract.rows import operator_row
from bot.outbox.queue import insert_outbox
from bot.settings.model import Settings
from bot.store.queries.incidents import locked_incident, open_incident
from bot.store.session import Db
from bot.together.errors import TogetherError
from bot.training.sessions import RawSession, TrainingSession

log = logging.getLogger(__name__)


async def track_incidents(
    db: Db,
    results: Iterable[TrainingSession | RawSession | TogetherError],
    *,
    settings: Settings,
    now: datetime,
) -> None:
    """One operator alert per incident: key rejected, or Together unreachable too long."""
    results = list(results)
    kinds = {r.kind for r in results if isinstance(r, TogetherError)}
    reachable = any(
        not isinstance(r, TogetherError) or r.kind in ("not_found", "auth") for r in results
    )
    authorised = any(not isinstance(r, TogetherError) or r.kind != "auth" for r in results)
    await note_incident(
        db,
        "together_auth",
        failing="auth" in kinds and not authorised,
        settings=settings,
        now=now,
        threshold=0.0,
        title="Together rejected the bot's API key",
        detail="Polling is paused until the key works again. Check TOGETHER_API_KEY.",
    )
    await note_incident(
        db,
        "together_outage",
        failing=not reachable and bool(kinds & {"unavailable"}),
        settings=settings,
        now=now,
        threshold=settings.together_outage_alert_seconds,
        title="Together is unreachable",
        detail="The poller has had no answer from Together for a while; changes will be told "
        "when it is back.",
    )


async def note_incident(
    db: Db,
    name: str,
    *,
    failing: bool,
    settings: Settings,
    now: datetime,
    threshold: float,
    title: str,
    detail: str,
) -> None:
    """Open (and, after `threshold` seconds, alert) or close the incident `name`."""
    incident = await locked_incident(db, name)
    channel = settings.oncall_channel
    if failing:
        if incident is None:
            incident = await open_incident(db, name, now=now)
        elif incident.opened_at is None:
            incident.opened_at = now
        assert incident.opened_at is not None
        due = (now - incident.opened_at).total_seconds() >= threshold
        if due and incident.alerted_at is None:
            incident.alerted_at = now
            incident.seq += 1
            log.error("operator incident: %s", title, extra={"incident": name})
            if channel:
                await insert_outbox(
                    db, [operator_row(channel, f"{name}:{incident.seq}:open", title, detail)]
                )
        return
    if incident is not None and incident.opened_at is not None:
        if incident.alerted_at is not None and channel:
            await insert_outbox(
                db,
                [
                    operator_row(
                        channel,
                        f"{name}:{incident.seq}:recovered",
                        f"Recovered: {title}",
                        "Together answers normally again.",
                    )
                ],
            )
        incident.opened_at = None
        incident.alerted_at = None
