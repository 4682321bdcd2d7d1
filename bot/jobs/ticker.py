"""APScheduler only ticks; the database decides who does what.

The jobs it ticks are declared in `bot.jobs.table`, their bodies in `bot.jobs.work`.

APScheduler 3 job stores cannot be shared between processes, so every
replica runs the same in-memory jobs, and the claims in `poll` and `outbox`
split the work. A tick that comes while the job's previous one still runs is
skipped on purpose and quietly (`_guarded`): the next tick comes soon, and the
work left over waits for it. `coalesce` folds ticks missed meanwhile into one.

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
from functools import partial
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot.jobs.spend_exchange import forget
from bot.jobs.table import scheduled
from bot.jobs.work import Work
from bot.outbox.results import hand_back_rows
from bot.runtime import Runtime
from bot.settings.timings import Timings
from bot.store.leases import hand_back_sessions
from bot.together.budget import charged_to

log = logging.getLogger(__name__)


class Ticker:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.scheduler = AsyncIOScheduler(timezone=UTC)
        self.stopping = False
        self._running: set[asyncio.Task[Any]] = set()
        #: the jobs with a tick running now
        self._busy: set[str] = set()
        self.deliver_soon = rt.deliver_soon
        self._loops: list[asyncio.Task[None]] = []
        self.work = Work(
            rt, ring=self.deliver_soon.set, run_now=self._run_now, stopping=lambda: self.stopping
        )

    def start(self) -> None:
        """Begin, from within the running event loop: hand back, heartbeat, then tick."""
        self._loops.append(asyncio.get_running_loop().create_task(self._begin()))

    async def _begin(self) -> None:
        await release_leases(self.rt)
        await self.work.share_spend()
        if self.stopping:
            return
        self._schedule()
        self._loops.append(asyncio.create_task(self._delivery_loop()))

    def _schedule(self) -> None:
        for job, seconds in scheduled(self.rt.settings):
            self._every(job.name, partial(job.body, self.work), seconds)
        self.scheduler.start()

    def _every(self, name: str, work: Any, seconds: float) -> None:
        self.scheduler.add_job(
            self._guarded,
            "interval",
            args=[name, work],
            id=name,
            seconds=seconds,
            # Two, so that APScheduler hands an overlapping tick to `_guarded`, which skips
            # it without a word, rather than skipping it with a warning of its own.
            max_instances=2,
            coalesce=True,
            next_run_time=datetime.now(UTC),
            misfire_grace_time=None,
        )

    async def _guarded(self, name: str, work: Any) -> None:
        if self.stopping or name in self._busy:
            return
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
        self._busy.add(name)
        try:
            with charged_to(name):  # its Together requests, in the request budget
                await work()
        except Exception:
            # The next tick tries again (PostgreSQL restarting, Slack down, a bug).
            log.exception("%s tick failed", name)
        finally:
            self._busy.discard(name)
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
            await self._guarded("deliver", self.work.deliver)

    def _run_now(self, name: str) -> None:
        job = self.scheduler.get_job(name)
        if job is not None and not self.stopping:
            job.modify(next_run_time=datetime.now(UTC))

    async def shutdown(self, grace: float = 20.0) -> None:
        """Stop taking work, let running ticks finish, then hand back any leases."""
        self.stopping = True
        self.deliver_soon.set()  # the delivery loop wakes and ends
        if (gate := getattr(self.rt.together, "gate", None)) is not None:
            gate.close()  # a job waiting for a share of the budget ends now
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
