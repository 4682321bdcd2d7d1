"""Fault injection for crash tests: `FAULT_CRASH_AT=<step>` kills the process
with SIGKILL when it reaches that step, so tests can prove that a crash at any
point loses nothing and repeats nothing. `FAULT_CLOCK_SKEW_SECONDS` shifts this
process's wall clock (`store.tables.utcnow`), so tests can show that leases are
decided by the database's clock, not a replica's. Unset in production: no-ops.
"""

from __future__ import annotations

import logging
import math
import os
import signal
from datetime import timedelta
from functools import cache

log = logging.getLogger(__name__)

STEPS = (
    "poll_after_claim",  # sessions leased, nothing fetched yet
    "poll_after_state_write",  # new state and outbox rows committed, nothing sent
    "deliver_after_claim",  # outbox rows leased, nothing posted
    "deliver_after_post",  # Slack has the thread reply, the outbox does not know yet
    "deliver_after_update",  # root updated, outbox not yet marked sent
)


def crash_point(step: str, configured: str | None) -> None:
    if configured and configured == step:
        log.warning("fault injection: SIGKILL at %s", step)
        os.kill(os.getpid(), signal.SIGKILL)


@cache
def clock_skew() -> timedelta:
    """Read once, when first needed: nothing is read from the environment at import."""
    try:
        seconds = float(os.environ.get("FAULT_CLOCK_SKEW_SECONDS") or 0)
    except ValueError:
        seconds = 0.0
    return timedelta(seconds=seconds if math.isfinite(seconds) else 0.0)
