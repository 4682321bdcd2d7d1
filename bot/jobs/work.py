"""The bodies of the periodic jobs (`bot.jobs.table` declares when each runs), and
what they keep between runs: the poller's view of the project, follow
discovery's state, the spend watch's resource reads.

A body that wrote outbox rows rings the delivery loop (`ring`), so a change is
told now rather than at the next tick.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bot.alerts.error_watch import page_new_errors
from bot.alerts.idle import watch_idle_resources
from bot.alerts.resource_reader import ResourceReader
from bot.alerts.subscribed_idle import watch_subscribed_idle
from bot.delivery.loop import Delivery, deliver_due
from bot.jobs.digests import send_digests
from bot.jobs.follow import discover
from bot.jobs.follow_live import DiscoveryState
from bot.jobs.metric_reads import read_metrics
from bot.jobs.prune import prune_follow, prune_outbox, prune_watches
from bot.jobs.repage import repage_unacknowledged
from bot.jobs.spend_exchange import Spend, deployment, exchange
from bot.outbox.contract.rows import State
from bot.outbox.queue import pending_count
from bot.poll.cycle import poll_cycle
from bot.poll.deps import PollState
from bot.poll.leases import release_all
from bot.poll.pace import Planner, side_window
from bot.runtime import Runtime
from bot.settings.timings import Timings
from bot.store.queries.audience import active_subscription_count
from bot.training.status import status_of

log = logging.getLogger(__name__)


class Work:
    def __init__(
        self,
        rt: Runtime,
        *,
        ring: Callable[[], None],
        run_now: Callable[[str], None],
        stopping: Callable[[], bool],
    ) -> None:
        self.rt = rt
        self.ring = ring
        self.run_now = run_now
        self.stopping = stopping
        self._poll_failed = False
        # Kept across cycles: what the poller has seen of the project; the list passes
        # every consumer in this process shares (the runtime's, `rt.lister`); the
        # spend watch's reader, whose prices outlive a cycle (cached per resource shape).
        self.poll_state = PollState(
            Planner(side_window=side_window(rt.settings)),
            rt.lister,
            ResourceReader(
                rt.together,
                refresh_seconds=rt.settings.spend_refresh_seconds,
                retry_seconds=rt.settings.read_retry_seconds,
                cache=rt.resources,
            )
            if rt.settings.spend_watch
            else None,
            wrote_rows=ring,
        )
        # what follow-rule discovery keeps between runs (a refused created_by filter)
        self.discovery = DiscoveryState()

    async def poll(self) -> None:
        rt = self.rt
        if self._poll_failed:  # its batch may have kept leases it could not hand back
            if released := await release_all(rt.sessionmaker, owner=rt.owner):
                log.info("handed back %d sessions a failed poll cycle still held", released)
            self._poll_failed = False
        try:
            result = await poll_cycle(rt, self.poll_state)
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
            rt.metrics.poll_budget_others.set(self.poll_state.planner.others)
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
            self.ring()  # tell the change now, not at the next tick
        if result.list_pages:
            self.run_now("follow")  # discovery reads this pass's roster: no pass of its own

    async def follow(self) -> None:
        """Follow rules and personal switches: subscribe or watch new live sessions."""
        found = await discover(self.rt, lister=self.rt.lister, state=self.discovery)
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
        self.poll_state.planner.remote = sum(s.others for s in remote)
        gate = getattr(rt.together, "gate", None)
        if gate is not None:  # people's requests into the books, and the books read
            await gate.book_people()
        everyone = deployment(local, remote)
        rt.metrics.poll_budget_others.set(everyone.others)
        rt.metrics.deployment_spent.set(everyone.requests)
        rt.metrics.budget_replicas.set(1 + len(remote))

    async def deliver(self) -> None:
        rt = self.rt
        while not self.stopping():
            outcomes = await deliver_due(Delivery.of(rt))
            if not any(o.state == State.SENT for o in outcomes):
                break

    async def watch_errors(self) -> None:
        if await page_new_errors(self.rt, lister=self.rt.lister):
            self.ring()

    async def watch_idle(self) -> None:
        if await watch_idle_resources(self.rt):
            self.ring()

    async def watch_subscribed_idle(self) -> None:
        if await watch_subscribed_idle(self.rt, reader=self.poll_state.resources):
            self.ring()

    async def repage(self) -> None:
        if await repage_unacknowledged(self.rt):
            self.ring()

    async def read_wandb(self) -> None:
        if await read_metrics(self.rt):
            self.ring()  # a metric gone bad is told now

    async def digest(self) -> None:
        if await send_digests(self.rt):
            self.ring()

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
