"""Every time a replica waits on, sized from a few settings.

The lease is the root: a dead, hung or disconnected replica keeps work from the
others for at most one lease, so every renewal, heartbeat and takeover is a
fraction of it, and changing `LEASE_SECONDS` keeps them all in step. The poll
tick and the due slack come from the poll intervals. docs/architecture.md's
table "Leases, ticks and windows" is this class in words.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.settings.model import Settings

# The heartbeat is written at least this often, whatever the lease.
MAX_HEARTBEAT_SECONDS = 5.0
# A report of spend is a replica gone once it is this old (or two leases, if longer).
REPORT_STALE_SECONDS = 30.0
# The poll job's tick stays within these bounds whatever the intervals.
POLL_TICK_MIN_SECONDS = 0.25
POLL_TICK_MAX_SECONDS = 5.0
# A session may be claimed at most this long before it is due: ticks jitter by
# milliseconds, and a session missed by one waits a whole tick more.
MAX_DUE_SLACK_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class Timings:
    """The times of the timing table, in seconds."""

    lease: float
    # Work renews what it holds this often: two renewals may fail before the lease ends.
    renew_every: float
    # Each replica's `replica_spend` row is rewritten this often.
    heartbeat_every: float
    # A holder whose heartbeat is older than this counts as gone.
    silent_after: float
    # A gone holder's lease unrenewed this long is adopted at once.
    unrenewed_after: float
    # A spend report this old is ignored and deleted.
    report_stale: float
    # The poll job ticks this often: a due session waits at most a tick.
    poll_tick: float
    # How long before it is due a session may be claimed.
    due_slack: float
    # Delivery runs at least this often when nothing rings it.
    delivery_every: float

    @classmethod
    def of(cls, settings: Settings) -> Timings:
        return cls.of_lease(
            settings.lease_seconds,
            poll_min_interval=settings.poll_min_interval_seconds,
            poll_interval=settings.poll_interval_seconds,
            delivery_every=settings.delivery_interval_seconds,
        )

    @classmethod
    def of_lease(
        cls,
        lease: float,
        *,
        poll_min_interval: float = 2.0,
        poll_interval: float = 60.0,
        delivery_every: float = 1.0,
    ) -> Timings:
        renew_every = lease / 3
        return cls(
            lease=lease,
            renew_every=renew_every,
            heartbeat_every=min(MAX_HEARTBEAT_SECONDS, lease / 10),
            silent_after=lease / 4,
            unrenewed_after=2 * renew_every,
            report_stale=max(REPORT_STALE_SECONDS, 2 * lease),
            poll_tick=min(
                poll_interval,
                POLL_TICK_MAX_SECONDS,
                max(POLL_TICK_MIN_SECONDS, poll_min_interval / 5),
            ),
            due_slack=min(MAX_DUE_SLACK_SECONDS, poll_interval / 10),
            delivery_every=delivery_every,
        )
