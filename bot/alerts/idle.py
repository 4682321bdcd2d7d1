"""The org-wide idle-resource watch (WATCH_IDLE_RESOURCES): model resources
that are READY, and billing, with no CREATING or RUNNING session on them.

Stopping a session leaves its resource running until it is stopped or idles
out (`inactive_timeout`, about an hour). Each run lists the READY resources
(Together's list, real pagination, at most WATCH_ALL_MAX_PAGES pages) and, for
each, the sessions on it; a resource idle for IDLE_RESOURCE_ALERT_MINUTES gets
one alert in the on-call channel and in the threads of its sessions'
subscriptions, with a Stop resource button.

Nothing is stored: a resource has been idle since the later of its own
`updated_at` (it became READY) and its sessions' last `updated_at` (the last one
stopped), both Together's, so every replica and every restart computes the same
episode, and the dedupe key built from it makes the alert once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.alerts.spend import ResourceReader, stored_model
from bot.outbox.contract.payloads import IdlePayload
from bot.outbox.contract.rows import Thread, idle_rows
from bot.outbox.queue import insert_outbox
from bot.runtime import Runtime
from bot.store.job_locks import claim_job, release_job
from bot.store.tables import Subscription, WatchedSession, utcnow
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.training.resources import CostEstimate, ModelResource
from bot.training.sessions import TrainingSession, is_session_id
from bot.training.snapshots import trimmed_snapshot
from bot.training.status import STATUS_PREFIX, ResourceStatus, Status, status_of

log = logging.getLogger(__name__)
_M = TypeVar("_M", ModelResource, CostEstimate)

READY = "MODEL_RESOURCES_STATUS_READY"
#: sessions whose presence keeps a resource busy
ACTIVE = frozenset({Status.CREATING, Status.RUNNING})
#: sessions named in an alert
SHOWN_SESSIONS = 10
#: `subscriptions.ended_reason` when the poller ended it because the session ended
SESSION_ENDED = "session ended"


def _utc(when: datetime | None) -> datetime | None:
    """Naive UTC, as the database's times are."""
    if when is None or when.tzinfo is None:
        return when
    return when.astimezone(UTC).replace(tzinfo=None)


def idle_since(resource: ModelResource, sessions: Sequence[TrainingSession]) -> datetime | None:
    """When a READY resource last had something to do: None while a session on it
    is active (or when Together gives no time at all)."""
    if any(s.status_enum in ACTIVE for s in sessions):
        return None
    times = [_utc(resource.updated_at), *(_utc(s.updated_at) for s in sessions)]
    known = [t for t in times if t is not None]
    return max(known) if known else None


async def watch_idle_resources(rt: Runtime) -> int:
    """One run of the watch; returns how many alerts (rows) it wrote."""
    settings = rt.settings
    after = timedelta(minutes=settings.idle_resource_alert_minutes)
    if not settings.oncall_channel or after <= timedelta(0):
        return 0
    async with rt.sessionmaker() as db, db.begin():
        job = await claim_job(
            db, "watch_idle_resources", owner=rt.owner, lease=settings.lease_seconds
        )
        if job is None:
            return 0
    try:
        payloads = await _idle(rt, after=after)
    except TogetherError as exc:
        log.warning("idle-resource watch could not list resources: %s", exc)
        payloads = []
    async with rt.sessionmaker() as db, db.begin():
        written = await write_idle_alerts(db, payloads, oncall_channel=settings.oncall_channel)
        await release_job(db, "watch_idle_resources", owner=rt.owner)
    return written


async def write_idle_alerts(
    db: AsyncSession,
    alerts: Sequence[tuple[IdlePayload, list[str]]],
    *,
    oncall_channel: str | None,
) -> int:
    """Outbox rows for idle alerts, each to its sessions' threads and on-call: the
    org-wide watch and the subscribed follow-up tell an idle resource the same way."""
    if not alerts:
        return 0
    ids = sorted({sid for _, session_ids in alerts for sid in session_ids})
    by_session = await threads_of(db, ids)
    rows = []
    for payload, session_ids in alerts:
        threads = [t for sid in session_ids for t in by_session.get(sid, [])]
        rows += idle_rows(payload, oncall_channel=oncall_channel, threads=threads)
    await insert_outbox(db, rows)
    return len(rows)


async def threads_of(db: AsyncSession, session_ids: Sequence[str]) -> dict[str, list[Thread]]:
    """The threads an idle alert about these sessions' resource goes to, by session."""
    if not session_ids:
        return {}
    subs = await db.execute(
        select(
            Subscription.id,
            Subscription.session_id,
            Subscription.channel_id,
            Subscription.root_ts,
        )
        .where(
            Subscription.session_id.in_(list(session_ids)),
            # A thread whose session ended is where its team looks for what
            # that left running; one that unsubscribed asked to hear nothing.
            or_(
                Subscription.active.is_(True),
                Subscription.ended_reason == SESSION_ENDED,
            ),
        )
        .order_by(Subscription.id)
    )
    by_session: dict[str, list[Thread]] = {}
    for sub in subs:
        by_session.setdefault(sub.session_id, []).append(
            Thread(sub.id, sub.session_id, sub.channel_id, sub.root_ts)
        )
    return by_session


async def attached_sessions(
    together: TogetherClient, resource_id: str, *, max_pages: int
) -> list[TrainingSession]:
    """Every session on a resource (Together's list, `model_resources_id`, page by
    page up to `max_pages`). A failed page raises: a resource must never look idle
    because a page with its running session was not read."""
    sessions: list[TrainingSession] = []
    cursor: str | None = None
    for _ in range(max_pages):
        page, cursor = await together.list_sessions(model_resources_id=resource_id, after=cursor)
        sessions += page
        if cursor is None:
            return sessions
    raise TogetherError("bad_response", f"more than {max_pages} pages of sessions on a resource")


def idle_payload(
    resource: ModelResource,
    sessions: Sequence[TrainingSession],
    *,
    since: datetime,
    price: CostEstimate | None,
) -> IdlePayload:
    """The alert of one idle episode: the resource, its price, its newest sessions."""
    newest = sorted(sessions, key=lambda s: _utc(s.updated_at) or since, reverse=True)
    return IdlePayload(
        resource=resource.model_dump(mode="json"),
        idle_since=since,
        currency=price.currency if price else None,
        price_per_hour=price.price_per_hour if price else None,
        sessions=[trimmed_snapshot(s) for s in newest[:SHOWN_SESSIONS]],
    )


async def _idle(rt: Runtime, *, after: timedelta) -> list[tuple[IdlePayload, list[str]]]:
    """The READY resources idle for `after`, each with the ids of all its sessions."""
    together = rt.together
    now = utcnow()
    found: list[tuple[IdlePayload, list[str]]] = []
    cursor: str | None = None
    for _ in range(rt.settings.watch_all_max_pages):
        resources, cursor = await together.list_model_resources(status=[READY], after=cursor)
        for resource in resources:
            try:
                sessions = await attached_sessions(
                    together, resource.id, max_pages=rt.settings.watch_all_max_pages
                )
            except TogetherError as exc:  # this one is not known idle; the others may be
                log.info("could not list a resource's sessions: %s", exc.kind)
                continue
            since = idle_since(resource, sessions)
            if since is None or now - since < after:
                continue
            price = None
            try:
                price = await together.estimate_cost(resource)
            except TogetherError as exc:
                log.info("no price for an idle resource: %s", exc)
            payload = idle_payload(resource, sessions, since=since, price=price)
            found.append((payload, [s.id for s in sessions]))
        if cursor is None:
            break
    return found


# --- subscribed sessions' resources ------------------------------------------------------------

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
    return _utc(when)
