"""The subscribed sessions' idle-resource watch: a watched session that ended
leaves its model resource behind, and its threads hear when that resource sits
READY, and billing, with nothing on it.

It judges idleness by the org-wide watch's rule (`bot.alerts.idle.idle_since`)
and writes the same alert with the same dedupe keys, so a resource is told once
whichever watch finds it first. Where each session's check stands is kept
in its `watched_sessions.progress` (`IdleCheck`), which `ls` also reads.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.alerts.backoff import FIRST_SECONDS, wait_after
from bot.alerts.idle import (
    ACTIVE,
    attached_sessions,
    idle_payload,
    idle_since,
    threads_of,
    write_idle_alerts,
)
from bot.alerts.resource_reader import ResourceReader
from bot.outbox.contract.payloads import IdlePayload
from bot.runtime import Runtime
from bot.store.job_locks import claim_job, release_job, renewing
from bot.store.queries.personal_alerts import listeners
from bot.store.queries.watch_state import ended_progress, mark_ended_progress, recently_ended
from bot.store.session import Db
from bot.store.tables import database_now
from bot.together.errors import TogetherError
from bot.training.poll_progress import IdleCheck, PollProgress, SpendRead
from bot.training.resources import CostEstimate, ModelResource
from bot.training.sessions import is_session_id
from bot.training.snapshots import SessionSnapshot
from bot.training.status import STATUS_PREFIX, ResourceStatus, status_of
from bot.training.time_bounds import later, naive_utc

log = logging.getLogger(__name__)

#: the job's name (its lease in `jobs`, and what its Together requests are charged to)
SUBSCRIBED_JOB = "watch_subscribed_idle"
#: an ended session's resource is followed for at most this long after its last poll
FOLLOW_FOR = timedelta(days=1)
#: the most ended watches one run reads, the most recently ended first
FOLLOW_UP_ROWS = 1000
_NOT_IDLE = tuple(f"{STATUS_PREFIX}{s.value}" for s in ACTIVE) + tuple(s.value for s in ACTIVE)
#: a resource in one of these will never be READY again: its check is over
ENDED = frozenset({ResourceStatus.STOPPED, ResourceStatus.ERROR})


@dataclass(frozen=True)
class Candidate:
    """A watched session that ended, whose resource may be idle."""

    session_id: str
    resource_id: str
    #: the spend watch's read of the resource (its last poll), when fresh enough to use
    fresh: ModelResource | None = None
    price: CostEstimate | None = None
    #: looks at this resource that failed in a row before this one
    failures: int = 0
    #: since when an earlier look found it idle (kept through a failed look, for `ls`)
    idle_since: datetime | None = None


def candidate(
    session_id: str,
    *,
    last_status: str,
    progress: PollProgress,
    snapshot: SessionSnapshot | None,
    now: datetime,
    fresh_for: timedelta,
) -> Candidate | None:
    """Whether an ended watched session's resource is worth a look now: the session
    is not CREATING or RUNNING, the resource was not last read as anything but
    READY, and its check is not over (alerted, taken by another session,
    stopped or failed) nor waiting for a later time. Pure."""
    if status_of(last_status) in ACTIVE:
        return None
    spend = progress.spend or SpendRead()
    resource_id = spend.resource_id
    if not resource_id:
        resource_id = snapshot.model_resources_id if snapshot is not None else None
    if not isinstance(resource_id, str) or not is_session_id(resource_id):
        return None
    check = progress.idle_check
    failures, since = 0, None
    if check is not None and check.resource_id == resource_id:
        if check.done:
            return None
        at = naive_utc(check.check_at)
        if at is not None and now < at:
            return None
        failures, since = check.failures, check.idle_since
    fresh = None
    seen = naive_utc(spend.seen_at)
    if spend.resource_id == resource_id and seen is not None and now - seen <= fresh_for:
        if spend.status != ResourceStatus.READY.value:
            return None  # the spend watch read it just now: not READY, so not idle
        fresh = spend.model_resource()
    return Candidate(session_id, resource_id, fresh, spend.cost(), failures, since)


async def watch_subscribed_idle(rt: Runtime, *, reader: ResourceReader | None = None) -> int:
    """One run of the subscribed sessions' idle-resource watch; returns the
    rows it wrote. See README "Idle model resources": a watched session that
    ended (stopped, failed, expired: no longer polled) leaves its resource to be
    looked at (the spend watch's read at its last poll when fresh, else one
    GET); one still queued or starting is looked at again later, one STOPPED or
    in ERROR is done with, and a READY one has its sessions listed, and once no
    CREATING or RUNNING session has been on it for IDLE_RESOURCE_ALERT_MINUTES
    (`idle_since`, the org-wide watch's rule) its sessions' threads, and on-call
    when set, get the idle alert (the org-wide watch's dedupe keys: told once,
    whichever watch finds it first)."""
    settings = rt.settings
    after = timedelta(minutes=settings.idle_resource_alert_minutes)
    if after <= timedelta(0):
        return 0
    async with rt.sessionmaker() as db, db.begin():
        # Nothing ended lately (the common case): nothing to claim, and no write.
        if not await recently_ended(
            db, not_in=_NOT_IDLE, within=FOLLOW_FOR.total_seconds(), limit=1
        ):
            return 0
        if (
            await claim_job(
                db, SUBSCRIBED_JOB, owner=rt.owner, lease_seconds=settings.lease_seconds
            )
            is None
        ):
            return 0
    written = 0
    try:
        async with renewing(
            rt.sessionmaker, SUBSCRIBED_JOB, owner=rt.owner, lease_seconds=settings.lease_seconds
        ):
            written = await _follow_up(rt, after=after, reader=reader)
    finally:
        async with rt.sessionmaker() as db, db.begin():
            await release_job(db, SUBSCRIBED_JOB, owner=rt.owner)
    return written


async def _follow_up(rt: Runtime, *, after: timedelta, reader: ResourceReader | None) -> int:
    settings = rt.settings
    async with rt.sessionmaker() as db:
        now = await database_now(db)
        # A session still polled (even STOPPING) is left to its poller: it is looked
        # at once it ended, idle since Together's own times; the window ends a day
        # after the poller last wrote it.
        rows = await recently_ended(
            db, not_in=_NOT_IDLE, within=FOLLOW_FOR.total_seconds(), limit=FOLLOW_UP_ROWS
        )
        if len(rows) == FOLLOW_UP_ROWS:
            log.warning(
                "subscribed-idle watch: %d ended watches or more; the oldest wait", len(rows)
            )
        found = [
            c
            for r in rows
            if (
                c := candidate(
                    r.session_id,
                    last_status=r.last_status,
                    progress=r.progress or PollProgress(),
                    snapshot=r.snapshot,
                    now=now,
                    fresh_for=timedelta(seconds=2 * settings.poll_interval_seconds),
                )
            )
            is not None
        ]
        ids = sorted({c.session_id for c in found})
        threads = await threads_of(db, ids)
        people = await listeners(db, ids)
    by_resource: dict[str, list[Candidate]] = {}
    for c in found:
        if threads.get(c.session_id) or people.get(c.session_id):  # else nobody to tell
            by_resource.setdefault(c.resource_id, []).append(c)
    first = settings.read_retry_seconds
    marks: dict[str, IdleCheck] = {}
    alerts: list[tuple[IdlePayload, list[str]]] = []
    for resource_id, on_it in sorted(by_resource.items()):
        failures = max(c.failures for c in on_it) + 1
        since = next((c.idle_since for c in on_it if c.idle_since is not None), None)
        try:
            outcome = await _look(rt, resource_id, on_it, after=after, now=now, reader=reader)
        except TogetherError as exc:
            log.info("could not check an idle resource: %s", exc.kind)
            retry = retry_later(failures, now=now, retry_after=exc.retry_after, first=first)
            outcome = retry.model_copy(update={"idle_since": since}), None
        except Exception:  # this resource's data; the others' alerts are still written
            log.exception("could not check idle resource %s", resource_id)
            retry = retry_later(failures, now=now, retry_after=None, first=first)
            outcome = retry.model_copy(update={"idle_since": since}), None
        mark, alert = outcome
        for c in on_it:
            marks[c.session_id] = mark.model_copy(update={"resource_id": resource_id})
        if alert is not None:
            alerts.append(alert)
    async with rt.sessionmaker() as db, db.begin():
        written = await write_idle_alerts(
            db,
            alerts,
            oncall_channel=settings.oncall_channel,
            user_map=settings.created_by_user_map,
        )
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
) -> tuple[IdleCheck, tuple[IdlePayload, list[str]] | None]:
    """One resource's check: where it stands now, and its alert when it is due."""
    together = rt.together
    resource = next((c.fresh for c in on_it if c.fresh is not None), None)
    if resource is None:
        try:
            resource = await together.get_model_resource(resource_id, max_wait=5)
        except TogetherError as exc:
            if (over := final_answer(exc)) is None:
                raise
            return IdleCheck(done=over), None
    status = resource.status_enum
    if status in ENDED:
        return IdleCheck(done=status.value.lower()), None
    if status is not ResourceStatus.READY:
        return waiting(status, now=now, after=after), None
    sessions = await attached_sessions(
        together, resource_id, max_pages=rt.settings.watch_all_max_pages
    )
    since = idle_since(resource, sessions)
    if since is None:
        # Another session took it: its own watch (if any) follows it when it ends.
        return IdleCheck(done="busy"), None
    if now - since < after:
        due = later(since, after)
        return IdleCheck(check_at=due, idle_since=since), None
    price = next((c.price for c in on_it if c.price is not None), None)
    if price is None:
        try:
            price = await (reader.price(resource) if reader else together.estimate_cost(resource))
        except TogetherError as exc:
            log.info("no price for an idle resource: %s", exc.kind)
    ids = sorted({s.id for s in sessions} | {c.session_id for c in on_it})
    payload = idle_payload(resource, sessions, since=since, price=price)
    return IdleCheck(done="alerted", idle_since=since), (payload, ids)


def final_answer(exc: TogetherError) -> str | None:
    """The mark of an answer that will not change by asking again (Together's own
    404, a 4xx refusal, an id it cannot take): the check is over, rather than
    asking every interval until FOLLOW_FOR runs out. None: worth asking again
    (a timeout, a 5xx, a rate limit, the key refused). Pure."""
    if exc.kind == "not_found":
        return "gone"
    if exc.kind == "invalid_id" or (
        exc.kind == "bad_response" and exc.status is not None and 400 <= exc.status < 500
    ):
        return "refused"
    return None


def retry_later(
    failures: int, *, now: datetime, retry_after: float | None, first: float = FIRST_SECONDS
) -> IdleCheck:
    """The mark of a look that failed for a passing reason (a timeout, a 5xx, an
    answer that does not read): looked at again later, the wait doubling with
    each failure in a row (`bot.alerts.backoff.wait_after`), so a resource
    Together cannot answer for costs a request every few minutes, not one every
    run, for at most FOLLOW_FOR. The count is kept in the database, read on the
    database's clock: every replica backs off alike. Pure."""
    return IdleCheck(
        check_at=later(now, wait_after(failures, retry_after, first=first)), failures=failures
    )


def waiting(status: ResourceStatus, *, now: datetime, after: timedelta) -> IdleCheck:
    """The mark of a resource not READY yet (queued for GPUs, starting) nor ended:
    it may still turn READY and sit idle, so it is looked at again, often enough
    that its alert comes at most a quarter of IDLE_RESOURCE_ALERT_MINUTES late.
    Pure."""
    return IdleCheck(waiting=status.value, check_at=later(now, after / 4))


async def _mark(db: Db, marks: dict[str, IdleCheck]) -> None:
    """Note where each ended session's check stands, in its progress column
    (rows the poller no longer writes). `updated_at` stays when the watch ended: it
    bounds how long the check goes on and when the watch is pruned."""
    if not marks:
        return
    for r in await ended_progress(db, list(marks)):
        progress = r.progress or PollProgress()
        progress = progress.model_copy(update={"idle_check": marks[r.session_id]})
        await mark_ended_progress(db, r.session_id, progress)


def known_idle_since(progress: PollProgress, resource_id: str | None) -> datetime | None:
    """When this check last found the session's resource idle (None: it did not,
    or it found it busy or gone since). Pure; for `ls`."""
    check = progress.idle_check
    if check is None or not resource_id or check.resource_id != resource_id:
        return None
    if check.done not in (None, "alerted"):
        return None
    return naive_utc(check.idle_since)
