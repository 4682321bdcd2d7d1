"""The org-wide idle-resource watch (WATCH_IDLE_RESOURCES): model resources
that are READY, and billing, with no CREATING or RUNNING session on them.

Stopping a session leaves its resource running until it is stopped or idles
out (`inactive_timeout`, about an hour). Each run lists the READY resources
(Together's list, real pagination, at most WATCH_ALL_MAX_PAGES pages) and, for
each, the sessions on it; a resource idle for IDLE_RESOURCE_ALERT_MINUTES gets
one alert in the on-call channel and in the threads of its sessions'
subscriptions, with a Stop resource button. The subscribed-idle watch
(`bot.alerts.subscribed_idle`) tells an idle resource the same way.

Nothing is stored: a resource has been idle since the later of its own
`updated_at` (it became READY) and its sessions' last `updated_at` (the last one
stopped), both Together's, so every replica and every restart computes the same
episode, and the dedupe key built from it makes the alert once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from bot.outbox.contract.payloads import IdlePayload
from bot.outbox.contract.rows import Thread, dm_row, idle_rows
from bot.outbox.creator_dm import creator_dms
from bot.outbox.queue import insert_outbox
from bot.runtime import Runtime
from bot.store.job_locks import exclusive_job
from bot.store.queries.personal_alerts import listeners
from bot.store.queries.subscriptions import threads_of_sessions
from bot.store.session import Db
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.training.resources import CostEstimate, ModelResource
from bot.training.sessions import TrainingSession
from bot.training.snapshots import SessionSnapshot
from bot.training.status import Status
from bot.training.time_bounds import naive_utc

log = logging.getLogger(__name__)

READY = "MODEL_RESOURCES_STATUS_READY"
#: sessions whose presence keeps a resource busy
ACTIVE = frozenset({Status.CREATING, Status.RUNNING})
#: sessions named in an alert
SHOWN_SESSIONS = 10


def idle_since(resource: ModelResource, sessions: Sequence[TrainingSession]) -> datetime | None:
    """When a READY resource last had something to do: None while a session on it
    is active (or when Together gives no time at all)."""
    if any(s.status_enum in ACTIVE for s in sessions):
        return None
    times = [naive_utc(resource.updated_at), *(naive_utc(s.updated_at) for s in sessions)]
    known = [t for t in times if t is not None]
    return max(known) if known else None


async def watch_idle_resources(rt: Runtime) -> int:
    """One run of the watch; returns how many alerts (rows) it wrote."""
    settings = rt.settings
    after = timedelta(minutes=settings.idle_resource_alert_minutes)
    if not settings.oncall_channel or after <= timedelta(0):
        return 0
    async with exclusive_job(
        rt.sessionmaker,
        "watch_idle_resources",
        owner=rt.owner,
        lease_seconds=settings.lease_seconds,
    ) as run:
        if run is None:
            return 0
        payloads = await _idle(rt, now=run.now, after=after)
        async with rt.sessionmaker() as db, db.begin():
            written = await write_idle_alerts(
                db,
                payloads,
                oncall_channel=settings.oncall_channel,
                user_map=settings.created_by_user_map,
            )
    return written


async def write_idle_alerts(
    db: Db,
    alerts: Sequence[tuple[IdlePayload, list[str]]],
    *,
    oncall_channel: str | None,
    user_map: Mapping[str, str] | None = None,
) -> int:
    """Outbox rows for idle alerts, each to its sessions' threads, on-call, the
    creator's DM (for a thread with `dm=creator`) and the people whose App Home
    switch took one of its sessions: the org-wide watch and the subscribed-idle
    watch tell an idle resource the same way."""
    if not alerts:
        return 0
    ids = sorted({sid for _, session_ids in alerts for sid in session_ids})
    by_session = await threads_of(db, ids)
    people = await listeners(db, ids)
    rows = []
    for payload, session_ids in alerts:
        threads = [t for sid in session_ids for t in by_session.get(sid, [])]
        rows += idle_rows(payload, oncall_channel=oncall_channel, threads=threads)
        # the people whose App Home switch took one of its sessions, once each
        resource_id = payload.resource.id
        told = {user: sid for sid in session_ids for user in people.get(sid, [])}
        occurrence = f"idle:{resource_id}:{payload.idle_since.isoformat()}"
        rows += [dm_row(u, sid, payload, occurrence=occurrence) for u, sid in told.items()]
    rows += await creator_dms(db, rows, user_map=user_map or {})
    await insert_outbox(db, rows)
    return len(rows)


async def threads_of(db: Db, session_ids: Sequence[str]) -> dict[str, list[Thread]]:
    """The threads an idle alert about these sessions' resource goes to, by session."""
    by_session: dict[str, list[Thread]] = {}
    for sub in await threads_of_sessions(db, session_ids):
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
    newest = sorted(sessions, key=lambda s: naive_utc(s.updated_at) or since, reverse=True)
    return IdlePayload(
        resource=resource,
        idle_since=since,
        currency=price.currency if price else None,
        price_per_hour=price.price_per_hour if price else None,
        sessions=[SessionSnapshot.of(s) for s in newest[:SHOWN_SESSIONS]],
    )


async def _idle(
    rt: Runtime, *, now: datetime, after: timedelta
) -> list[tuple[IdlePayload, list[str]]]:
    """The READY resources idle for `after`, each with the ids of all its sessions.

    A page that cannot be read ends the walk, not the run: the resources already
    found idle are alerted all the same (the rest are looked at next run). One
    resource that cannot be judged is skipped; the others may still be idle."""
    together = rt.together
    found: list[tuple[IdlePayload, list[str]]] = []
    cursor: str | None = None
    for _ in range(rt.settings.watch_all_max_pages):
        try:
            resources, cursor = await together.list_model_resources(status=[READY], after=cursor)
        except TogetherError as exc:
            log.warning("idle-resource watch could not list resources: %s", exc)
            break
        for resource in resources:
            try:
                alert = await _judge(rt, resource, now=now, after=after)
            except TogetherError as exc:  # this one is not known idle; the others may be
                log.info("could not list a resource's sessions: %s", exc.kind)
                continue
            except Exception:
                log.exception("could not judge idle resource %s", resource.id)
                continue
            if alert is not None:
                found.append(alert)
        if cursor is None:
            break
    return found


async def _judge(
    rt: Runtime, resource: ModelResource, *, now: datetime, after: timedelta
) -> tuple[IdlePayload, list[str]] | None:
    """One READY resource's alert, when it has been idle for `after`."""
    together = rt.together
    sessions = await attached_sessions(
        together, resource.id, max_pages=rt.settings.watch_all_max_pages
    )
    since = idle_since(resource, sessions)
    if since is None or now - since < after:
        return None
    price = None
    try:
        price = await together.estimate_cost(resource)
    except TogetherError as exc:
        log.info("no price for an idle resource: %s", exc)
    payload = idle_payload(resource, sessions, since=since, price=price)
    return payload, [s.id for s in sessions]
