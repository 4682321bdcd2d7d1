"""Stall, slow-start, idle-resource and spend rules: pure functions, no I/O.

Why these exist: Together's training loop runs in the user's own process. When
that process dies the session does not go to ERROR; it stays RUNNING, its
`step` stops moving, and its model resource keeps billing until it has idled
for `inactive_timeout` (about an hour), when the session EXPIRES. A stopped
session leaves its resource READY, and billing, until it is stopped or times
out. Status changes say none of this; these rules do, from what the bot sees
in its own polls.

Each rule takes the previous state (None the first time), what was observed
now and the time, and returns the new state plus at most one event. The
state is small and serialisable (the poller stores it); an event carries an
`episode` key that is the same for every replica and every restart, so the
outbox's dedupe key makes it exactly-once.

Default thresholds, and why:

- `STALL_AFTER` 15 min: a quarter of Together's default `inactive_timeout`
  (3600 s), so a team told about a dead client still has about 45 minutes to
  restart it before the resource idles out and the session expires. It is
  well above a slow RL step (rollouts plus forward-backward plus optimizer
  step take seconds to a few minutes on the supported models) and 15 poll
  intervals at the default 60 s, so one slow step or a missed poll never
  pages anyone. A team with slower steps (long reward computation) sets
  `stall=30m`, or `stall=off`, per subscription.
- `CREATING_ALERT_AFTER` 30 min: provisioning takes minutes when GPUs are
  free; after half an hour the session is almost always queued for capacity,
  which the resource's queue position shows. Earlier would mostly report
  ordinary start-up.
- `IDLE_RESOURCE_ALERT_MINUTES` 20: stopping a session and starting a fixed
  one on the same resource commonly takes a few minutes, which must not
  nag; 20 minutes is still 40 minutes before a one-hour `inactive_timeout`
  stops the resource on its own, so acting on the alert saves two thirds of
  the idle bill.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from bot.training.status import ResourceStatus, Status
from bot.training.time_bounds import later, span

STALL_AFTER = timedelta(minutes=15)
CREATING_ALERT_AFTER = timedelta(minutes=30)
IDLE_RESOURCE_ALERT_AFTER = timedelta(minutes=20)
#: Together's documented default; used only when a resource does not say its own.
DEFAULT_INACTIVE_TIMEOUT = timedelta(hours=1)
#: weight of the newest measurement in the steps-per-minute average
RATE_SMOOTHING = 0.5
#: a gap between two polls longer than this is not counted as observed READY time
MAX_OBSERVED_GAP = timedelta(minutes=30)
#: statuses that keep a resource busy (it is not idle while one is attached)
ACTIVE_SESSION = frozenset({Status.CREATING, Status.RUNNING})


# --- progress and stalls ----------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """What the bot knows about one session's step, from its own polls."""

    step: int | None
    #: when the bot first saw this step while RUNNING (the stall clock starts here)
    since: datetime
    running: bool
    #: steps per minute, smoothed over the step changes the bot has seen
    rate: float | None = None
    #: `since` is a change the bot saw (a step moving, or the start of RUNNING),
    #: not merely its first look, so a rate may be measured from it
    anchored: bool = False


@dataclass(frozen=True)
class StepChange:
    """The step moved between two polls."""

    old_step: int | None
    new_step: int | None
    #: when the previous step was first seen: a stall episode is named by it
    old_since: datetime


def observe_progress(
    prev: Progress | None, *, status: Status, step: int | None, now: datetime
) -> tuple[Progress, StepChange | None]:
    """Advance the progress state by one poll.

    The stall clock restarts when the step changes and when the session
    (re)enters RUNNING, so time spent CREATING never counts as "no progress".
    An answer without a step is no evidence of movement. The rate is measured
    between two changes the bot saw: (new - old) / (now - since), exact over
    whole intervals whatever the poll interval (the first look is no start:
    the step may have been under way for a while); a step that goes
    backwards (a restart from a checkpoint) resets it."""
    running = status is Status.RUNNING
    if prev is None:
        return Progress(step=step, since=now, running=running), None
    if step is None:
        step = prev.step
    if step == prev.step and running == prev.running:
        return prev, None
    if step == prev.step:  # entered or left RUNNING
        return Progress(step, now, running, prev.rate, anchored=running), None
    change = StepChange(prev.step, step, prev.since)
    rate: float | None = prev.rate
    if prev.step is not None and step is not None and step < prev.step:
        rate = None
    elif prev.running and running and prev.anchored:
        rate = _next_rate(prev, step, now)
    return Progress(step, now, running, rate, anchored=True), change


def _next_rate(prev: Progress, step: int | None, now: datetime) -> float | None:
    minutes = (now - prev.since).total_seconds() / 60
    if step is None or prev.step is None or minutes <= 0:
        return prev.rate
    measured = (step - prev.step) / minutes
    if prev.rate is None:
        return measured
    return RATE_SMOOTHING * measured + (1 - RATE_SMOOTHING) * prev.rate


def stalled_for(progress: Progress, now: datetime) -> timedelta | None:
    """How long a RUNNING session's step has not moved (None when not running
    or when Together gives no step, which is no evidence either way)."""
    if not progress.running or progress.step is None:
        return None
    return max(now - progress.since, timedelta(0))


StallKind = Literal["stalled", "resumed"]


@dataclass(frozen=True)
class StallEvent:
    kind: StallKind
    step: int | None
    #: the stall episode: when the frozen step was first seen
    since: datetime
    #: for "resumed": the step it moved to
    new_step: int | None = None

    @property
    def episode(self) -> str:
        """The same for every replica and restart: (kind, episode start)."""
        return f"{self.kind}:{self.since.isoformat()}"


@dataclass(frozen=True)
class StallNotice:
    """One subscriber's view of a stall: its threshold and whether it was told."""

    #: None: stall alerts are off for this subscription
    stall_after: timedelta | None = STALL_AFTER
    #: the episode (`Progress.since`) this subscriber was told is stalled
    told_since: datetime | None = None


def stall_rule(
    watch: StallNotice,
    progress: Progress,
    change: StepChange | None,
    now: datetime,
) -> tuple[StallNotice, StallEvent | None]:
    """One "stalled" per episode once the threshold passes, one "resumed" when
    the step moves again; a session that stops running ends the episode
    silently (its status change is told already)."""
    if watch.told_since is not None:
        if change is not None and progress.running and change.old_since == watch.told_since:
            event = StallEvent("resumed", change.old_step, watch.told_since, change.new_step)
            return replace(watch, told_since=None), event
        if not progress.running or progress.since != watch.told_since:
            return replace(watch, told_since=None), None
        return watch, None
    if watch.stall_after is None:
        return watch, None
    frozen = stalled_for(progress, now)
    if frozen is None or frozen < watch.stall_after:
        return watch, None
    event = StallEvent("stalled", progress.step, progress.since)
    return replace(watch, told_since=progress.since), event


def idles_out_at(
    progress: Progress, *, expires_at: datetime | None, inactive_timeout: int | None
) -> datetime:
    """When the resource stops for inactivity (and the session expires).

    Together's `expires_at` when the resource gives it; otherwise the last
    step change seen plus the resource's `inactive_timeout` (a session start
    and every operation count as activity, so this is a lower bound). A timeout
    past the last date there is gives that date."""
    if expires_at is not None:
        return expires_at
    timeout = (
        span(inactive_timeout)
        if inactive_timeout is not None and inactive_timeout > 0
        else DEFAULT_INACTIVE_TIMEOUT
    )
    return later(progress.since, timeout)


def eta(progress: Progress, target: int | None, now: datetime) -> datetime | None:
    """When the step should reach `target` at the measured rate (None when
    there is no target, no rate, or the session is not making progress)."""
    if target is None or progress.step is None or not progress.running:
        return None
    if progress.step >= target:
        return now
    if progress.rate is None or progress.rate <= 0:
        return None
    minutes = (target - progress.step) / progress.rate
    if not minutes <= 60 * 24 * 365:  # a year or more (or no number): not an ETA anyone can use
        return None
    return later(now, span(minutes * 60))


# --- slow start ------------------------------------------------------------------------------


def creating_overdue(
    *,
    status: Status,
    created_at: datetime | None,
    first_seen: datetime,
    now: datetime,
    after: timedelta = CREATING_ALERT_AFTER,
) -> bool:
    """A session still CREATING `after` its creation (Together's `created_at`,
    or when the bot first saw it if Together gives none)."""
    if status is not Status.CREATING:
        return False
    start = created_at if created_at is not None else first_seen
    return now - start >= after


def creating_episode(created_at: datetime | None, first_seen: datetime) -> str:
    """One slow-start alert per session: named by when its creation started."""
    return f"creating:{(created_at or first_seen).isoformat()}"


# --- model resources: observed READY time, idleness, spend -------------------------------------


@dataclass(frozen=True)
class ResourceSeen:
    """What the bot has observed of one model resource."""

    status: ResourceStatus
    seen_at: datetime
    #: READY time the bot observed (the span between two polls that saw READY)
    ready_seconds: float = 0.0
    #: READY with no CREATING or RUNNING session attached, since then
    idle_since: datetime | None = None
    #: the idle episode (`idle_since`) already alerted
    idle_told: datetime | None = None


@dataclass(frozen=True)
class IdleEvent:
    idle_since: datetime

    @property
    def episode(self) -> str:
        return f"idle:{self.idle_since.isoformat()}"


def observe_resource(
    prev: ResourceSeen | None,
    *,
    status: ResourceStatus,
    active_sessions: int,
    now: datetime,
    idle_after: timedelta | None = IDLE_RESOURCE_ALERT_AFTER,
) -> tuple[ResourceSeen, IdleEvent | None]:
    """Accumulate observed READY time and decide the idle alert.

    Between two polls that both saw READY the whole span counts; when the
    status changed in between, half of it (the bot cannot know when). A span
    longer than MAX_OBSERVED_GAP (the bot was down) is not counted: the spend
    shown is what the bot saw, never a guess across an outage. `idle_after`
    None turns the alert off but still tracks idleness for the card."""
    ready = status is ResourceStatus.READY
    seconds = prev.ready_seconds if prev is not None else 0.0
    if prev is not None and now > prev.seen_at:
        gap = now - prev.seen_at
        was_ready = prev.status is ResourceStatus.READY
        if gap <= MAX_OBSERVED_GAP and (was_ready or ready):
            share = 1.0 if was_ready and ready else 0.5
            seconds += gap.total_seconds() * share
    idle = ready and active_sessions == 0
    idle_since = (prev.idle_since if prev is not None else None) if idle else None
    if idle and idle_since is None:
        idle_since = now
    told = prev.idle_told if prev is not None and prev.idle_told == idle_since else None
    watch = ResourceSeen(status, now, seconds, idle_since, told)
    if (
        idle_since is not None
        and told is None
        and idle_after is not None
        and now - idle_since >= idle_after
    ):
        return replace(watch, idle_told=idle_since), IdleEvent(idle_since)
    return watch, None


def estimated_spend(ready_seconds: float, price_per_hour: float | None) -> float | None:
    """Price per hour times the READY time the bot observed: an estimate, not a bill."""
    if price_per_hour is None or price_per_hour < 0 or ready_seconds < 0:
        return None
    return price_per_hour * ready_seconds / 3600


def rate_words(rate: float | None) -> str | None:
    """Steps per minute to two significant figures (`12 steps/min`, `0.25 steps/min`),
    so the card does not change on every poll over noise."""
    if rate is None or rate != rate or rate < 0 or rate > 1e12:
        return None
    if 0 < rate < 0.01:
        return "under 0.01 steps/min"
    shown = f"{rate:.2g}" if rate < 100 else f"{round(rate):,}"
    if "e" in shown:
        shown = f"{rate:,.0f}"
    return f"{shown} steps/min"
