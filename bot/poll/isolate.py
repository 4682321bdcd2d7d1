"""Storing a batch so that one session whose result cannot be stored never holds
back the others.

A session whose result cannot be stored (odd API text the database refuses, or
any other exception while it is judged, told or written: a value from outside
that no rule foresaw) is split off until it stands alone; it is backed off, and
after MAX_WRITE_FAILURES polls in a row it is set aside with one operator alert.
Only the database going away fails the whole write: that is no one session's
fault, and the next tick tries again.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from bot.alerts.resource_reader import Read
from bot.outbox.contract.rows import bounded_key, operator_row
from bot.outbox.queue import insert_outbox
from bot.poll.fetch import Fetched
from bot.poll.pace import backoff
from bot.poll.record import record_outcomes
from bot.settings.model import Settings
from bot.store.errors import database_lost, failure_name, from_database
from bot.store.leases import HANDED_BACK
from bot.store.queries.watch_state import held_write_failures, set_watch
from bot.store.session import Sessionmaker
from bot.store.write_apart import write_apart

log = logging.getLogger(__name__)

# Polls in a row whose result could not be stored before a session is set aside.
MAX_WRITE_FAILURES = 5


async def store_apart(
    sessionmaker: Sessionmaker,
    part: dict[str, Fetched],
    *,
    owner: str,
    settings: Settings,
    polled_at: datetime | None,
    interval: float,
    reads: Mapping[str, Read] | None = None,
) -> tuple[dict[str, int], int]:
    """Write `part` in one transaction. If the database refuses it (or judging,
    telling or writing it raises anything else), each half in its own transaction, halved again where it fails, until the sessions that
    cannot be stored stand alone (one bad session among n costs about 2·log2(n)
    transactions). Those are counted toward being set aside, unless none at all
    could be stored: then the fault is not in any one session, and nothing is
    counted.

    Returns how many sessions changed to each status, and the outbox rows written."""
    to_status: dict[str, int] = defaultdict(int)
    totals = [0, 0]  # outbox rows, sessions stored

    async def store(chunk: Sequence[str]) -> None:
        async with sessionmaker() as db, db.begin():
            statuses, written = await record_outcomes(
                db,
                {sid: part[sid] for sid in chunk},
                owner=owner,
                settings=settings,
                polled_at=polled_at,
                interval=interval,
                incidents=False,
                reads=reads,
            )
        for status, n in statuses.items():
            to_status[status] += n
        totals[0] += written
        totals[1] += len(chunk)

    refused = await write_apart(
        list(part),
        store,
        fatal=database_lost,
        split_warning="could not store this batch's poll results (%s); storing each session apart",
    )
    for session_id, exc in refused:
        if not from_database(exc):  # a bug or an unforeseen value: say where
            log.error(
                "could not judge or store a session's poll result",
                exc_info=exc,
                extra={"session_id": session_id},
            )
        await _note_write_failure(sessionmaker, session_id, exc, owner=owner, settings=settings)
    return dict(to_status), totals[0]


async def _note_write_failure(
    sessionmaker: Sessionmaker,
    session_id: str,
    exc: Exception,
    *,
    owner: str,
    settings: Settings,
) -> None:
    """Count a poll whose result could not be stored; back off, and at
    MAX_WRITE_FAILURES set the session aside with one operator alert."""
    reason = failure_name(exc)
    async with sessionmaker() as db, db.begin():
        row = await held_write_failures(db, session_id, owner=owner)
        if row is None:
            return
        failures = row.write_failures + 1
        delay = backoff(failures, settings.poll_interval_seconds, None)
        values: dict[str, Any] = {
            "write_failures": failures,
            "last_failure": f"could not store a poll result ({reason})",
            "next_poll_at": row.db_now + timedelta(seconds=delay),
            **HANDED_BACK,
        }
        log.warning(
            "could not store a session's poll result (%d in a row): %s",
            failures,
            reason,
            extra={"session_id": session_id},
        )
        if failures >= MAX_WRITE_FAILURES:
            values.update(
                active=False,
                last_failure=f"set aside: {failures} poll results in a row could not be "
                f"stored ({reason})",
            )
            log.error(
                "session set aside: its poll results cannot be stored",
                extra={"session_id": session_id},
            )
            if settings.oncall_channel:
                await insert_outbox(
                    db,
                    [
                        operator_row(
                            settings.oncall_channel,
                            bounded_key("set-aside", session_id, str(row.transition_seq)),
                            "A watched session was set aside",
                            f"{failures} polls in a row of session {session_id[:128]} could "
                            f"not be stored ({reason}); it is no longer polled and its "
                            "subscriptions hear nothing more. Unsubscribe and subscribe "
                            "again to retry.",
                        )
                    ],
                )
        await set_watch(db, session_id, values)
