"""The stall watch between a poll and the outbox: pure, no I/O.

`check` runs in the poller for each session it fetched: it advances the
stored progress (`watch_rules.observe_progress`) and says whether there is
anything to decide this poll (a RUNNING session whose step has not moved for
a minute or more, a step that moved after such a freeze, a session still
CREATING). `rows` runs where the subscriptions are known (`notify`): each
subscription's own threshold (`stall=30m`, `stall=off`, else
STALL_AFTER_MINUTES) decides its "stalled" and "resumed" rows, and
CREATING_ALERT_AFTER_MINUTES the "still creating" one.

Nothing about what was told is stored: a row's dedupe key names its episode
(when the frozen step was first seen, or when creation started), so writing
it again on the next poll, on another replica or after a restart, is a no-op.
A "resumed" is owed only if an earlier poll already saw the stall past the
threshold, so it always follows its "stalled".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.outbox.contract.payloads import ProgressPayload
from bot.outbox.contract.rows import OutboxRow, Thread, progress_row, stall_page_row
from bot.training.poll_progress import PollProgress, SpendRead
from bot.training.rules import (
    STALL_AFTER,
    Progress,
    StepChange,
    creating_overdue,
    idles_out_at,
    observe_progress,
    stalled_for,
)
from bot.training.sessions import TrainingSession
from bot.training.snapshots import SessionSnapshot
from bot.training.status import ResourceStatus, Status
from bot.training.time_bounds import naive_utc, utc


@dataclass(frozen=True)
class ProgressCheck:
    """What one poll saw of a session's progress, for `rows` to decide on."""

    progress: Progress
    change: StepChange | None
    #: when the previous poll saw the session (None on the first)
    prev_seen_at: datetime | None
    status: Status
    created_at: datetime | None
    #: what the spend watch last read of the session's resource (None: not read, or
    #: not READY): when Together will stop it for inactivity, and its timeout
    expires_at: datetime | None = None
    inactive_timeout: int | None = None


#: A subscription's own threshold (`stall=`) is whole minutes, at least one.
SHORTEST_OWN_THRESHOLD = timedelta(minutes=1)


def check(
    stored: PollProgress,
    session: TrainingSession,
    *,
    now: datetime,
    stall_after: timedelta | None = STALL_AFTER,
) -> tuple[PollProgress, ProgressCheck | None]:
    """The new progress column (the step as this poll saw it, the spend watch's
    last read carried over), and a check when this poll may owe a message.

    `stall_after` is the default threshold (STALL_AFTER_MINUTES; None: off). No
    threshold is shorter than it or than a minute, so a step frozen for less
    than that (or a stall that ended sooner) owes no row in any thread: no
    check, and the poller reads no subscriptions for it."""
    prev = stored.progress()
    prev_seen_at = stored.seen_at if prev is not None else None
    status = session.status_enum
    progress, change = observe_progress(prev, status=status, step=session.step, now=now)
    new = PollProgress.seen(progress, now, spend=stored.spend)
    least = min(stall_after, SHORTEST_OWN_THRESHOLD) if stall_after else SHORTEST_OWN_THRESHOLD
    frozen = stalled_for(progress, now)
    worth = (
        (frozen is not None and frozen >= least)
        or (
            change is not None
            and progress.running
            and prev_seen_at is not None
            and prev_seen_at - change.old_since >= least
        )
        or status is Status.CREATING
    )
    if not worth:
        return new, None
    created = _like(session.created_at, now)
    expires_at, timeout = resource_timing(stored.spend)
    return new, ProgressCheck(
        progress, change, prev_seen_at, status, created, _like(expires_at, now), timeout
    )


def resource_timing(spend: SpendRead | None) -> tuple[datetime | None, int | None]:
    """From the spend watch's last read of the resource: its `expires_at` while
    READY, and its `inactive_timeout` (None for what it did not say). Read from
    Together's resource as stored, without parsing all of it."""
    if spend is None or spend.resource is None:
        return None, None
    resource = spend.facts()
    timeout = resource.inactive_timeout
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout <= 0:
        timeout = None
    expires_at = None
    if spend.status == ResourceStatus.READY.value:
        try:
            raw = resource.expires_at
            expires_at = datetime.fromisoformat(str(raw).replace("Z", "+00:00")) if raw else None
        except ValueError:
            expires_at = None
    return expires_at, timeout


def _like(when: datetime | None, now: datetime) -> datetime | None:
    """`when` comparable with `now`: the database's times are naive UTC. A time
    from Together whose offset carries it past the years `datetime` holds is
    clamped to the edge."""
    if when is None or (when.tzinfo is None) == (now.tzinfo is None):
        return when
    return naive_utc(when) if now.tzinfo is None else utc(when)


@dataclass(frozen=True)
class StallSettings:
    stall_after: timedelta | None  # None: off unless a subscription turns it on
    creating_after: timedelta | None
    oncall_channel: str | None = None
    page_on_stall: bool = False


def threshold(minutes: int | None, default: timedelta | None) -> timedelta | None:
    """A subscription's threshold: its own (0 is off), else the default."""
    if minutes is None:
        return default
    return timedelta(minutes=minutes) if minutes > 0 else None


def rows(
    check: ProgressCheck,
    session: TrainingSession,
    threads: Sequence[tuple[Thread, int | None, bool]],
    *,
    now: datetime,
    settings: StallSettings,
) -> list[OutboxRow]:
    """The rows one check owes: per (thread, its `stall_after_minutes`, muted).

    A stall says when the resource idles out: Together's `expires_at` when the
    spend watch read it, else an estimate (the last step change plus the
    resource's inactive timeout), and says which."""
    out: list[OutboxRow] = []
    snapshot = SessionSnapshot.of(session)
    progress = check.progress
    frozen = stalled_for(progress, now)
    idle_at = idles_out_at(
        progress, expires_at=check.expires_at, inactive_timeout=check.inactive_timeout
    )
    # One stall, told in each thread whose threshold it passed and perhaps paged.
    stalled = (
        ProgressPayload(
            event="stalled",
            step=progress.step,
            since=progress.since,
            seconds=frozen.total_seconds(),
            idles_out_at=idle_at,
            idles_out_estimated=check.expires_at is None,
            session=snapshot,
        )
        if frozen is not None
        else None
    )
    for thread, minutes, muted in threads:
        if muted:
            continue
        after = threshold(minutes, settings.stall_after)
        if after is not None and stalled is not None and stalled.seconds >= after.total_seconds():
            out.append(progress_row(thread, stalled))
        change = check.change
        if (
            after is not None
            and change is not None
            and progress.running
            and check.prev_seen_at is not None
            and check.prev_seen_at - change.old_since >= after
        ):
            payload = ProgressPayload(
                event="resumed",
                step=change.old_step,
                new_step=change.new_step,
                since=change.old_since,
                seconds=(now - change.old_since).total_seconds(),
                rate=progress.rate,
                session=snapshot,
            )
            out.append(progress_row(thread, payload))
        if settings.creating_after is not None and creating_overdue(
            status=check.status,
            created_at=check.created_at,
            first_seen=progress.since,
            now=now,
            after=settings.creating_after,
        ):
            start = check.created_at or progress.since
            payload = ProgressPayload(
                event="creating",
                since=start,
                seconds=(now - start).total_seconds(),
                session=snapshot,
            )
            out.append(progress_row(thread, payload))
    if (
        settings.page_on_stall
        and settings.oncall_channel
        and settings.stall_after is not None
        and stalled is not None
        and stalled.seconds >= settings.stall_after.total_seconds()
        and any(threshold(m, settings.stall_after) is not None for _, m, _ in threads)
    ):
        first = threads[0][0] if threads else None
        page = stalled.model_copy(
            update={
                "page": True,
                "thread_channel": first.channel_id if first else None,
                "thread_ts": first.thread_ts if first else None,
            }
        )
        out.append(stall_page_row(settings.oncall_channel, session.id, page))
    return out
