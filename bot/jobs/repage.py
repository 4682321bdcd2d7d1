"""Paging on-call once more (ONCALL_REPAGE_MINUTES): each run, one replica
(job lock) writes a repage row for every page nobody acknowledged in time
(`bot.outbox.oncall_pages.unacknowledged`); delivery posts it in the page's thread,
shown in the channel too, mentioning ONCALL_MENTION. Its dedupe key makes each
page repaged once, whichever replica runs it."""

from __future__ import annotations

from bot.outbox.oncall_pages import unacknowledged
from bot.outbox.queue import insert_outbox
from bot.runtime import Runtime
from bot.store.job_locks import exclusive_job

JOB = "repage_unacknowledged"


async def repage_unacknowledged(rt: Runtime) -> int:
    """One run; how many repages it wrote (0 when off or another replica runs it)."""
    settings = rt.settings
    minutes, channel = settings.oncall_repage_minutes, settings.oncall_channel
    if minutes <= 0 or not channel:
        return 0
    async with exclusive_job(
        rt.sessionmaker, JOB, owner=rt.owner, lease_seconds=settings.lease_seconds
    ) as run:
        if run is None:
            return 0
        async with rt.sessionmaker() as db, db.begin():
            rows = await unacknowledged(db, channel=channel, minutes=minutes)
            await insert_outbox(db, rows)
    return len(rows)
