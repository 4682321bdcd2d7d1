"""The subscribed sessions' idle-resource follow-up: a watched session that ended
leaves its model resource behind, and its threads hear when that resource sits
READY, and billing, with nothing on it.

It judges idleness by the org-wide watch's rule (`bot.alerts.idle.idle_since`)
and writes the same alert with the same dedupe keys, so a resource is told once
whichever watch finds it first. Where each session's follow-up stands is kept
in its `watched_sessions.progress` (`IDLE_CHECK`), which `ls` also reads.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.alerts.idle import (
    ACTIVE,
    attached_sessions,
    idle_payload,
    idle_since,
    threads_of,
    write_idle_alerts,
)
from bot.alerts.resource_reader import ResourceReader
from bot.alerts.spend import stored_model
from bot.outbox.queue import IdlePayload
from bot.runtime import Runtime
from bot.store.job_locks import claim_job, release_job
from bot.store.tables import WatchedSession, utcnow
from bot.together.client import TogetherError
from bot.training.shapes import (
    STATUS_PREFIX,
    CostEstimate,
    ModelResource,
    ResourceStatus,
    is_session_id,
    status_of,
)
from bot.training.times import naive_utc

log = logging.getLogger(__name__)

#: the job's name (its lease in `jobs`, and what its Together requests are charged to)
SUBSCRIBED_JOB = "watch_subscribed_idle"
#: `watched_sessions.progress` key of where the follow-up of a session's resource stands
IDLE_CHECK = "idle_check"
#: an ended session's resource is followed for at most this long after its last poll
FOLLOW_FOR = timedelta(days=1)
_NOT_IDLE = tuple(f"{STATUS_PREFIX}{s.value}" for s in ACTIVE) + tuple(s.value for s in ACTIVE)


@dataclass(frozen=True)
class Candidate:
    """A watched session that ended, whose resource may be idle."""

    session_id: str
    resource_id: str
    #: the spend watch's read of the resource (its last poll), when fresh enough to use
    fresh: ModelResource | None = None
    price: CostEstimate | None = None


def candidate(
    session_id: str,
    *,
    last_status: str,
    progress: Any,
    snapshot: Any,
    now: datetime,
    fresh_for: timedelta,
) -> Candidate | None:
    """Whether an ended watched session's resource is worth a look now: the session
    is not CREATING or RUNNING, the resource was not last read as anything but
    READY, and its follow-up is not over (alerted, taken by another session, no
    longer READY) nor waiting for a later time. Pure."""
    if status_of(last_status) in ACTIVE:
        return None
    progress = progress if isinstance(progress, dict) else {}
    spend = progress.get("spend") if isinstance(progress.get("spend"), dict) else {}
    resource_id = spend.get("resource_id")
    if not isinstance(resource_id, str) or not resource_id:
        resource_id = snapshot.get("model_resources_id") if isinstance(snapshot, dict) else None
    if not isinstance(resource_id, str) or not is_session_id(resource_id):
        return None
    check = progress.get(IDLE_CHECK)
    if isinstance(check, dict) and check.get("resource_id") == resource_id:
        if check.get("done"):
            return None
        at = _when(check.get("check_at"))
        if at is not None and now < at:
            return None
    fresh = price = None
    seen = _when(spend.get("seen_at"))
    if spend.get("resource_id") == resource_id and seen is not None and now - seen <= fresh_for:
        if spend.get("status") != ResourceStatus.READY.value:
            return None  # the spend watch read it just now: not READY, so not idle
        fresh = stored_model(ModelResource, spend.get("resource"))
    if isinstance(spend.get("price"), dict):
        price = stored_model(CostEstimate, spend["price"])
    return Candidate(session_id, resource_id, fresh, price)


async def watch_subscribed_idle(rt: Runtime, *, reader: ResourceReader | None = None) -> int:
    """One run of the subscribed sessions' idle-resource follow-up; returns the
    rows it wrote. See README "Idle model resources": a watched session that
    ended (stopped, failed, expired: no longer polled) leaves its resource to be
    looked at (the spend watch's read at its last poll when fresh, else one
    GET); a READY one has its sessions
    listed, and once no CREATING or RUNNING session has been on it for
    IDLE_RESOURCE_ALERT_MINUTES (`idle_since`, the org-wide watch's rule) its
    sessions' threads, and on-call when set, get the idle alert (the org-wide
    watch's dedupe keys: told once, whichever watch finds it first)."""
    settings = rt.settings
    after = timedelta(minutes=settings.idle_resource_alert_minutes)
    if after <= timedelta(0):
        return 0
    async with rt.sessionmaker() as db, db.begin():
        if (
            await claim_job(db, SUBSCRIBED_JOB, owner=rt.owner, lease=settings.lease_seconds)
            is None
        ):
            return 0
    written = 0
    try:
        written = await _follow_up(rt, after=after, reader=reader)
    finally:
        async with rt.sessionmaker() as db, db.begin():
            await release_job(db, SUBSCRIBED_JOB, owner=rt.owner)
    return written


async def _follow_up(rt: Runtime, *, after: timedelta, reader: ResourceReader | None) -> int:
    settings = rt.settings
    now = utcnow()
    async with rt.sessionmaker() as db:
        rows = await db.execute(
            select(
                WatchedSession.session_id,
                WatchedSession.last_status,
                WatchedSession.progress,
                WatchedSession.snapshot,
            ).where(
                # A session still polled (even STOPPING) is left to its poller: it
                # is looked at once it ended, idle since Together's own times.
                WatchedSession.active.is_(False),
                WatchedSession.last_status.not_in(_NOT_IDLE),
                WatchedSession.updated_at > now - FOLLOW_FOR,
            )
        )
        found = [
            c
            for r in rows
            if (
                c := candidate(
                    r.session_id,
                    last_status=r.last_status,
                    progress=r.progress,
                    snapshot=r.snapshot,
                    now=now,
                    fresh_for=timedelta(seconds=2 * settings.poll_interval_seconds),
                )
            )
            is not None
        ]
        threads = await threads_of(db, sorted({c.session_id for c in found}))
    by_resource: dict[str, list[Candidate]] = {}
    for c in found:
        if threads.get(c.session_id):  # nobody to tell: not worth a request
            by_resource.setdefault(c.resource_id, []).append(c)
    marks: dict[str, dict[str, Any]] = {}
    alerts: list[tuple[IdlePayload, list[str]]] = []
    for resource_id, on_it in sorted(by_resource.items()):
        try:
            outcome = await _look(rt, resource_id, on_it, after=after, now=now, reader=reader)
        except TogetherError as exc:
            log.info("could not follow up an idle resource: %s", exc.kind)
            continue
        mark, alert = outcome
        for c in on_it:
            marks[c.session_id] = {"resource_id": resource_id} | mark
        if alert is not None:
            alerts.append(alert)
    async with rt.sessionmaker() as db, db.begin():
        written = await write_idle_alerts(db, alerts, oncall_channel=settings.oncall_channel)
        await _mark(db, marks)
    return written


async def _look(
    rt: Runtime,
    resource_id: str,
    on_it: Sequence[Candidate],
    *,
    after: timedelta,
    now: datetime,
    reader: ResourceReader | None,
) -> tuple[dict[str, Any], tuple[IdlePayload, list[str]] | None]:
    """One resource's follow-up: where it stands now, and its alert when it is due."""
    together = rt.together
    resource = next((c.fresh for c in on_it if c.fresh is not None), None)
    if resource is None:
        resource = await together.get_model_resource(resource_id, max_wait=5)
    if resource.status_enum is not ResourceStatus.READY:
        return {"done": "not ready"}, None
    sessions = await attached_sessions(
        together, resource_id, max_pages=rt.settings.watch_all_max_pages
    )
    since = idle_since(resource, sessions)
    if since is None:
        # Another session took it: its own watch (if any) follows it when it ends.
        return {"done": "busy"}, None
    if now - since < after:
        return {"check_at": (since + after).isoformat(), "idle_since": since.isoformat()}, None
    price = next((c.price for c in on_it if c.price is not None), None)
    if price is None:
        try:
            price = await (reader.price(resource) if reader else together.estimate_cost(resource))
        except TogetherError as exc:
            log.info("no price for an idle resource: %s", exc.kind)
    ids = sorted({s.id for s in sessions} | {c.session_id for c in on_it})
    payload = idle_payload(resource, sessions, since=since, price=price)
    return {"done": "alerted", "idle_since": since.isoformat()}, (payload, ids)


async def _mark(db: AsyncSession, marks: dict[str, dict[str, Any]]) -> None:
    """Note where each ended session's follow-up stands, in its progress column
    (rows the poller no longer writes)."""
    if not marks:
        return
    rows = await db.execute(
        select(WatchedSession.session_id, WatchedSession.progress).where(
            WatchedSession.session_id.in_(list(marks)), WatchedSession.active.is_(False)
        )
    )
    for r in rows:
        progress = dict(r.progress) if isinstance(r.progress, dict) else {}
        progress[IDLE_CHECK] = marks[r.session_id]
        await db.execute(
            update(WatchedSession)
            .where(WatchedSession.session_id == r.session_id, WatchedSession.active.is_(False))
            .values(progress=progress)
            .execution_options(synchronize_session=False)
        )


def known_idle_since(progress: Any, resource_id: str | None) -> datetime | None:
    """When this follow-up last found the session's resource idle (None: it did not,
    or it found it busy or gone since). Pure; for `ls`."""
    check = progress.get(IDLE_CHECK) if isinstance(progress, dict) else None
    if not isinstance(check, dict) or not resource_id or check.get("resource_id") != resource_id:
        return None
    if check.get("done") not in (None, "alerted"):
        return None
    return _when(check.get("idle_since"))


def _when(value: Any) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None
    return naive_utc(when)
