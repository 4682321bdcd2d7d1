"""APScheduler only ticks; the database decides who does what.

APScheduler 3 job stores cannot be shared between processes, so every
replica runs the same in-memory jobs, and the claims in `poll` and `outbox`
split the work. `max_instances=1` and `coalesce` keep one tick from
overlapping the next.

Delivery is not a scheduler job but a loop of its own that sleeps until it is
rung (`deliver_soon`: a poll part, a watch or a command wrote outbox rows) or
for DELIVERY_INTERVAL_SECONDS at most, so a change is sent as soon as it is
written and a ring while a pass runs is never lost (it starts the next pass).

On start, a replica first hands back any lease still held in its own name (a
previous process under the same REPLICA_ID that died) and writes its
heartbeat, before it claims anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot.alerts.error_watch import page_new_errors
from bot.alerts.idle import watch_idle_resources
from bot.alerts.idle_follow_up import watch_subscribed_idle
from bot.alerts.resource_reader import ResourceReader
from bot.delivery.loop import deliver_due
from bot.jobs.digests import send_digests
from bot.jobs.follow import discover
from bot.jobs.follow_live import DiscoveryState
from bot.jobs.metric_reads import read_metrics
from bot.jobs.prune import prune_follow, prune_outbox, prune_watches
from bot.jobs.repage import repage_unacknowledged
from bot.jobs.spend_exchange import Spend, deployment, exchange, forget
from bot.outbox.contract.rows import State
from bot.outbox.queue import pending_count
from bot.outbox.results import hand_back_rows
from bot.poll.cycle import poll_cycle
from bot.poll.leases import release_all
from bot.poll.pace import Planner, side_window
from bot.runtime import Runtime
from bot.settings.timings import Timings
from bot.store.leases import hand_back_sessions
from bot.store.queries.audience import active_subscription_count
from bot.together.budget import charged_to
from bot.training.status import status_of

log = logging.getLogger(__name__)
#: how often unacknowledged pages are looked for (a repage is at most this late)
REPAGE_CHECK_SECONDS = 10.0


class Ticker:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.scheduler = AsyncIOScheduler(timezone=UTC)
        self.stopping = False
        self._running: set[asyncio.Task[Any]] = set()
        self.deliver_soon = rt.deliver_soon
        self._loops: list[asyncio.Task[None]] = []
        self._poll_failed = False
        # Kept across cycles: what the poller has seen of the project. The list passes
        # every consumer in this process shares are the runtime's (`rt.lister`).
        self.planner = Planner(side_window=side_window(rt.settings))
        self.lister = rt.lister
        # the spend watch's prices outlive a cycle (cached per resource shape)
        # what follow-rule discovery keeps between runs (a refused created_by filter)
        self.discovery = DiscoveryState()
        self.resources = (
            ResourceReader(
                rt.together, refresh_seconds=rt.settings.spend_refresh_seconds, cache=rt.resources
            )
            if rt.settings.spend_watch
            else None
        )

    def start(self) -> None:
        """Begin, from within the running event loop: hand back, heartbeat, then tick."""
        self._loops.append(asyncio.get_running_loop().create_task(self._begin()))

    async def _begin(self) -> None:
        await release_leases(self.rt)
        await self.share_spend()
        if self.stopping:
            return
        self._schedule()
        self._loops.append(asyncio.create_task(self._delivery_loop()))

    def _schedule(self) -> None:
        settings = self.rt.settings
        # Often enough that a session due at the shortest interval waits little past
        # it: a round's sessions wait for the tick after they fall due, so a coarse
        # tick stretches every round past the interval the budget allows (at 2.5 s,
        # 16.5 s rounds on a 14.75 s interval in the bench). A tick that finds
        # nothing due costs one claim query.
        timings = Timings.of(settings)
        self._every("poll", self.poll, timings.poll_tick)
        self._every("digest", self.digest, 30)
        if settings.watch_all_errors:
            if not settings.oncall_channel:
                log.warning(
                    "WATCH_ALL_ERRORS is on but ONCALL_CHANNEL is not set: nothing to alert"
                )
            self._every("watch_errors", self.watch_errors, settings.poll_interval_seconds)
        if settings.watch_idle_resources:
            if not settings.oncall_channel:
                log.warning(
                    "WATCH_IDLE_RESOURCES is on but ONCALL_CHANNEL is not set: nothing to alert"
                )
            self._every("watch_idle", self.watch_idle, settings.poll_interval_seconds)
        if settings.idle_resource_alert_minutes > 0 and not (
            settings.watch_idle_resources and settings.oncall_channel
        ):
            # subscribed sessions' resources (the org-wide watch, when on, covers them)
            self._every(
                "watch_subscribed_idle", self.watch_subscribed_idle, settings.poll_interval_seconds
            )
        self._every("follow", self.follow, settings.poll_interval_seconds)
        if settings.oncall_repage_minutes > 0 and settings.oncall_channel:
            # often enough that a repage is at most a quarter of its delay late
            check = min(REPAGE_CHECK_SECONDS, max(1.0, settings.oncall_repage_minutes * 15))
            self._every("repage", self.repage, check)
        # the card's W&B reads and its chart: each session at most every
        # WANDB_REFRESH_SECONDS (without W&B, the chart of the polls' steps alone)
        self._every("read_wandb", self.read_wandb, 5)
        self._every("share_spend", self.share_spend, timings.heartbeat_every)
        self._every("gauges", self.gauges, 15)
        self._every("prune", self.prune, 3600)
        self.scheduler.start()

    def _every(self, name: str, work: Any, seconds: float) -> None:
        self.scheduler.add_job(
            self._guarded,
            "interval",
            args=[name, work],
            id=name,
            seconds=seconds,
            max_instances=1,
            coalesce=True,
            next_run_time=datetime.now(UTC),
            misfire_grace_time=None,
        )

    async def _guarded(self, name: str, work: Any) -> None:
        if self.stopping:
            return
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
        try:
            with charged_to(name):  # its Together requests, in the request budget
                await work()
        except Exception:
            # The next tick tries again (PostgreSQL restarting, Slack down, a bug).
            log.exception("%s tick failed", name)
        finally:
            if task is not None:
                self._running.discard(task)

    async def _delivery_loop(self) -> None:
        """Deliver when rung, or every DELIVERY_INTERVAL_SECONDS at the latest."""
        every = Timings.of(self.rt.settings).delivery_every
        while not self.stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.deliver_soon.wait(), timeout=every)
            self.deliver_soon.clear()
            if self.stopping:
                return
            await self._guarded("deliver", self.deliver)

    async def poll(self) -> None:
        rt = self.rt
        if self._poll_failed:  # its batch may have kept leases it could not hand back
            if released := await release_all(rt.sessionmaker, owner=rt.owner):
                log.info("handed back %d sessions a failed poll cycle still held", released)
            self._poll_failed = False
        try:
            result = await poll_cycle(
                sessionmaker=rt.sessionmaker,
                together=rt.together,
                settings=rt.settings,
                owner=rt.owner,
                planner=self.planner,
                lister=self.lister,
                resources=self.resources,
                wrote_rows=self._deliver_now,
            )
        except Exception:
            self._poll_failed = True
            raise
        rt.metrics.lease_renewals.labels(work="session").inc(result.renewals)
        if result.adopted:
            rt.metrics.leases_adopted.labels(work="session").inc(len(result.adopted))
            for seconds in result.adopted.values():
                rt.metrics.lease_takeover_seconds.labels(work="session").observe(seconds)
        if result.claimed:
            rt.metrics.poll_cycle_seconds.observe(result.seconds)
            rt.metrics.poll_sessions.inc(result.claimed)
            rt.metrics.poll_interval_seconds.set(result.interval)
            rt.metrics.poll_budget_others.set(self.planner.others)
            rt.metrics.poll_plans.labels(plan=result.plan.value).inc()
            rt.metrics.poll_requests.labels(kind="list_page").inc(result.list_pages)
            rt.metrics.poll_requests.labels(kind="get").inc(result.gets)
            for status, n in result.to_status.items():
                rt.metrics.transitions.labels(to_status=status_of(status).value).inc(n)
            log.info(
                "poll cycle: %d sessions, %d failed, %d transitions in %.2fs "
                "(plan %s: %d list pages, %d GETs, %d from the error watch's pages; "
                "next in %.1fs)",
                result.claimed,
                result.failed,
                result.transitions,
                result.seconds,
                result.plan.value,
                result.list_pages,
                result.gets,
                result.from_error_pages,
                result.interval,
            )
        if result.outbox_rows:
            self._deliver_now()  # tell the change now, not at the next tick
        if result.list_pages:
            self._run_now("follow")  # discovery reads this pass's roster: no pass of its own

    async def follow(self) -> None:
        """Follow rules and personal switches: subscribe or watch new live sessions."""
        found = await discover(self.rt, lister=self.lister, state=self.discovery)
        if found.subscribed or found.personal or found.capped or found.switched_off:
            log.info(
                "follow: %d subscribed, %d watched for a person, %d rules capped, %d switched off",
                found.subscribed,
                found.personal,
                found.capped,
                found.switched_off,
            )

    async def share_spend(self) -> None:
        """Report this replica's Together spend and learn the others' (`bot.jobs.spend_exchange`)."""
        rt = self.rt
        local = Spend.of(rt.together.ledger)
        try:
            remote = await exchange(
                rt.sessionmaker,
                owner=rt.owner,
                local=local,
                stale_seconds=Timings.of(rt.settings).report_stale,
            )
        except Exception as exc:
            # The poller goes on with this replica's own count alone.
            log.warning("could not share the Together spend with other replicas: %s", exc)
            rt.metrics.replica_heartbeats_failed.inc()
            remote = []
        self.planner.remote = sum(s.others for s in remote)
        everyone = deployment(local, remote)
        rt.metrics.poll_budget_others.set(everyone.others)
        rt.metrics.deployment_spent.set(everyone.requests)
        rt.metrics.budget_replicas.set(1 + len(remote))

    async def deliver(self) -> None:
        rt = self.rt
        while not self.stopping:
            outcomes = await deliver_due(
                together=rt.together,
                sessionmaker=rt.sessionmaker,
                slack=rt.delivery_slack,
                settings=rt.settings,
                owner=rt.owner,
                metrics=rt.metrics,
                runtime=rt,
            )
            if not any(o.state == State.SENT for o in outcomes):
                break

    async def watch_errors(self) -> None:
        if await page_new_errors(self.rt, lister=self.lister):
            self._deliver_now()

    async def watch_idle(self) -> None:
        if await watch_idle_resources(self.rt):
            self._deliver_now()

    async def watch_subscribed_idle(self) -> None:
        if await watch_subscribed_idle(self.rt, reader=self.resources):
            self._deliver_now()

    async def repage(self) -> None:
        if await repage_unacknowledged(self.rt):
            self._deliver_now()

    async def read_wandb(self) -> None:
        if await read_metrics(self.rt):
            self._deliver_now()  # a metric gone bad is told now

    async def digest(self) -> None:
        if await send_digests(self.rt):
            self._deliver_now()

    def _deliver_now(self) -> None:
        """Ring the delivery loop: outbox rows were just written."""
        self.deliver_soon.set()

    def _run_now(self, name: str) -> None:
        job = self.scheduler.get_job(name)
        if job is not None and not self.stopping:
            job.modify(next_run_time=datetime.now(UTC))

    async def prune(self) -> None:
        if pruned := await prune_outbox(self.rt):
            log.info("pruned %d finished outbox rows", pruned)
        subscriptions, watches = await prune_watches(self.rt)
        if subscriptions or watches:
            log.info("pruned %d ended subscriptions and %d watches", subscriptions, watches)
        if watches := await prune_follow(self.rt):
            log.info("pruned %d personal watches of sessions no longer watched", watches)

    async def gauges(self) -> None:
        async with self.rt.sessionmaker() as db:
            self.rt.metrics.outbox_depth.set(await pending_count(db))
            self.rt.metrics.subscriptions_active.set(await active_subscription_count(db))

    async def shutdown(self, grace: float = 20.0) -> None:
        """Stop taking work, let running ticks finish, then hand back any leases."""
        self.stopping = True
        self.deliver_soon.set()  # the delivery loop wakes and ends
        if self.scheduler.running:
            self.scheduler.pause()
        running = [t for t in self._running if not t.done()]
        running += [t for t in self._loops if not t.done() and t not in running]
        if running:
            _, pending = await asyncio.wait(running, timeout=grace)
            for task in pending:
                task.cancel()
        # Only now: APScheduler's executor cancels whatever job is still running.
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        await release_leases(self.rt)
        try:
            await forget(self.rt.sessionmaker, owner=self.rt.owner)
        except Exception:
            log.exception("could not take back this replica's spend report; it goes stale")


async def release_leases(rt: Runtime) -> None:
    owner = rt.owner
    try:
        async with rt.sessionmaker() as db, db.begin():
            await hand_back_sessions(db, None, owner=owner)
            await hand_back_rows(db, owner=owner)
    except Exception:
        log.exception("could not release leases; they expire by themselves")
