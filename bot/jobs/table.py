"""Every periodic job the bot runs, declared in one table: its name, how often it
runs and whether this deployment runs it at all. The bodies are `Work`'s methods
(`bot.jobs.work`); the ticker (`bot.jobs.ticker`) only schedules what is here.

A job's name is also what its Together requests are charged to in the request
budget (`bot.together.budget`), and the name `_run_now` asks for.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.jobs.work import Work
from bot.settings.model import Settings
from bot.settings.timings import Timings

log = logging.getLogger(__name__)

#: how often unacknowledged pages are looked for (a repage is at most this late)
REPAGE_CHECK_SECONDS = 10.0


def _always(settings: Settings) -> bool:
    return True


@dataclass(frozen=True)
class Job:
    name: str
    body: Callable[[Work], Awaitable[None]]
    #: seconds between two runs, for these settings
    every: Callable[[Settings], float]
    #: whether these settings run it at all
    runs: Callable[[Settings], bool] = _always


def _poll_tick(settings: Settings) -> float:
    # Often enough that a session due at the shortest interval waits little past
    # it: a round's sessions wait for the tick after they fall due, so a coarse
    # tick stretches every round past the interval the budget allows (at 2.5 s,
    # 16.5 s rounds on a 14.75 s interval in the bench). A tick that finds
    # nothing due costs one claim query.
    return Timings.of(settings).poll_tick


def _poll_interval(settings: Settings) -> float:
    return settings.poll_interval_seconds


def _subscribed_idle_runs(settings: Settings) -> bool:
    # subscribed sessions' resources (the org-wide watch, when on, covers them)
    return settings.idle_resource_alert_minutes > 0 and not (
        settings.watch_idle_resources and settings.oncall_channel
    )


def _repage_every(settings: Settings) -> float:
    # often enough that a repage is at most a quarter of its delay late
    return min(REPAGE_CHECK_SECONDS, max(1.0, settings.oncall_repage_minutes * 15))


JOBS: tuple[Job, ...] = (
    Job("poll", Work.poll, _poll_tick),
    Job("digest", Work.digest, lambda s: 30),
    Job("watch_errors", Work.watch_errors, _poll_interval, lambda s: s.watch_all_errors),
    Job("watch_idle", Work.watch_idle, _poll_interval, lambda s: s.watch_idle_resources),
    Job("watch_subscribed_idle", Work.watch_subscribed_idle, _poll_interval, _subscribed_idle_runs),
    Job("follow", Work.follow, _poll_interval),
    Job(
        "repage",
        Work.repage,
        _repage_every,
        lambda s: s.oncall_repage_minutes > 0 and bool(s.oncall_channel),
    ),
    # the card's W&B reads and its chart: each session at most every
    # WANDB_REFRESH_SECONDS (without W&B, the chart of the polls' steps alone)
    Job("read_wandb", Work.read_wandb, lambda s: 5),
    Job("share_spend", Work.share_spend, lambda s: Timings.of(s).heartbeat_every),
    Job("gauges", Work.gauges, lambda s: 15),
    Job("prune", Work.prune, lambda s: 3600),
)


def scheduled(settings: Settings) -> list[tuple[Job, float]]:
    """The jobs these settings run, with their periods; a watch switched on with
    nowhere to alert is said in the log (it runs, and has nothing to tell)."""
    if settings.watch_all_errors and not settings.oncall_channel:
        log.warning("WATCH_ALL_ERRORS is on but ONCALL_CHANNEL is not set: nothing to alert")
    if settings.watch_idle_resources and not settings.oncall_channel:
        log.warning("WATCH_IDLE_RESOURCES is on but ONCALL_CHANNEL is not set: nothing to alert")
    return [(job, job.every(settings)) for job in JOBS if job.runs(settings)]
