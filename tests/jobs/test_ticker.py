"""The ticker: a tick that comes while the job's previous one still runs is skipped
on purpose and without a word (APScheduler's own skip warned, 0-19 times a demo run).
In-process, no database."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest

from bot.jobs.ticker import Ticker
from bot.ops.metrics import Metrics
from bot.together.budget import Ledger


def _ticker() -> Ticker:
    rt = SimpleNamespace(
        settings=SimpleNamespace(spend_watch=False, spend_refresh_seconds=300.0),
        together=SimpleNamespace(ledger=Ledger()),
        lister=None,
        sessionmaker=None,
        owner="a",
        metrics=Metrics(),
        deliver_soon=asyncio.Event(),
    )
    return Ticker(rt)  # type: ignore[arg-type]


async def test_an_overlapping_tick_is_skipped_quietly(caplog: pytest.LogCaptureFixture) -> None:
    ticker = _ticker()
    release = asyncio.Event()
    second = asyncio.Event()
    running = 0
    most = 0
    runs = 0

    async def slow() -> None:
        nonlocal running, most, runs
        running += 1
        runs += 1
        most = max(most, running)
        if runs >= 2:
            second.set()
        try:
            await release.wait()
        finally:
            running -= 1

    caplog.set_level(logging.DEBUG)
    ticker._every("slow", slow, 0.02)
    ticker.scheduler.start()
    try:
        await asyncio.sleep(0.3)  # about 15 ticks come while the first one runs
        assert runs == 1
        release.set()
        await asyncio.wait_for(second.wait(), timeout=10)  # the ticks go on after it
    finally:
        ticker.scheduler.shutdown(wait=False)
    assert most == 1
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == []
