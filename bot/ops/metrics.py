"""Prometheus metrics on a private registry.

Nothing is registered at import time: `Metrics()` builds its own
`CollectorRegistry`, so tests can make as many independent instances as they
like, and `get_metrics()` hands out one process-wide instance, created on the
first call. The HTTP layer serves `get_metrics().render()` at /metrics.
"""

from __future__ import annotations

import threading
from http import HTTPStatus

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

__all__ = ["DELIVERY_OUTCOMES", "Metrics", "get_metrics", "status_code_label"]

# Slack wants the ack within 3 s; resolve the fast end (a few ms) finely.
ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0)
# Together calls: default timeout is 10 s.
TOGETHER_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# One poll cycle over every watched session: default interval is 60 s.
POLL_CYCLE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

# Taking over a stopped replica's lease: within half a lease (heartbeat) or one lease.
TAKEOVER_BUCKETS = (0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0)
#: what a lease is held on: a watched session (poll) or an outbox row (delivery)
LEASE_WORK = ("session", "outbox")

DELIVERY_OUTCOMES = ("sent", "retry", "dead", "duplicate_skipped", "auth_error")

_KNOWN_CODES = frozenset(str(int(s)) for s in HTTPStatus)


def status_code_label(label: str) -> str:
    """An HTTP status code as a label: a registered code as itself, any other
    by its class ("5xx"). Each label value is a time series kept for the life
    of the process, and a server may answer any three digits. Labels that are
    not digits are the client's own words (timeout, error) and kept."""
    if not label.isdigit() or label in _KNOWN_CODES:
        return label
    return f"{label[0]}xx"


class Metrics:
    """Every rl-bot metric, registered on `self.registry`.

    Counter names are given without `_total`; prometheus-client appends it, so
    `commands` is exposed as `rlbot_commands_total`.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry

        self.commands = Counter(
            "rlbot_commands",
            "Slash commands and buttons handled, by verb (a button by its name) and outcome.",
            ["verb", "outcome"],
            registry=r,
        )
        self.ack_seconds = Histogram(
            "rlbot_ack_seconds",
            "Time from receiving a Slack request to acknowledging it.",
            buckets=ACK_BUCKETS,
            registry=r,
        )
        self.together_requests = Counter(
            "rlbot_together_requests",
            "Requests to the Together API, by HTTP status code, 'error' or 'timeout'.",
            ["status"],
            registry=r,
        )
        self.together_request_seconds = Histogram(
            "rlbot_together_request_seconds",
            "Latency of requests to the Together API.",
            buckets=TOGETHER_BUCKETS,
            registry=r,
        )
        self.poll_cycle_seconds = Histogram(
            "rlbot_poll_cycle_seconds",
            "Duration of one poll cycle over all watched sessions.",
            buckets=POLL_CYCLE_BUCKETS,
            registry=r,
        )
        self.poll_sessions = Counter(
            "rlbot_poll_sessions",
            "Sessions polled.",
            registry=r,
        )
        self.poll_interval_seconds = Gauge(
            "rlbot_poll_interval_seconds",
            "The poll interval in use: the shortest the Together request budget allows.",
            registry=r,
        )
        self.poll_requests = Counter(
            "rlbot_poll_requests",
            "Together requests the poller spent, by kind: list_page|get.",
            ["kind"],
            registry=r,
        )
        self.together_spent = Counter(
            "rlbot_together_requests_spent",
            "Together requests sent, by kind (get|list_page|stop|resource_get|"
            "resource_list_page|estimate_cost|resource_stop|resource_extend|checkpoint_download) "
            "and by consumer (poll|spend|watch_errors|follow|"
            "watch_idle|watch_subscribed_idle|deliver|command): what "
            "TOGETHER_REQUESTS_PER_MINUTE covers.",
            ["kind", "consumer"],
            registry=r,
        )
        self.poll_budget_others = Gauge(
            "rlbot_poll_budget_others_per_minute",
            "Together requests every consumer but the poller spent in the last minute, on "
            "this replica and the other live ones: taken off TOGETHER_REQUESTS_PER_MINUTE "
            "before the poll interval is sized.",
            registry=r,
        )
        self.deployment_spent = Gauge(
            "rlbot_together_spent_deployment_per_minute",
            "Together requests the whole deployment spent in the last minute: this "
            "replica's own and the other live replicas' last reports (what "
            "TOGETHER_REQUESTS_PER_MINUTE bounds).",
            registry=r,
        )
        self.budget_replicas = Gauge(
            "rlbot_budget_replicas",
            "Replicas whose Together spend this one counts in the request budget "
            "(itself and the others that reported within 30 s).",
            registry=r,
        )
        self.budget_waited = Counter(
            "rlbot_budget_waited",
            "Together requests of a periodic job (consumer: poll|watch_errors|follow|"
            "watch_idle|watch_subscribed_idle) that had no share of the request budget "
            "when they asked, and waited for one.",
            ["consumer"],
            registry=r,
        )
        self.budget_wait_seconds = Counter(
            "rlbot_budget_wait_seconds",
            "Seconds periodic jobs' Together requests waited for a share of the budget.",
            ["consumer"],
            registry=r,
        )
        self.budget_refused = Counter(
            "rlbot_budget_refused",
            "Reads refused for want of a share of the budget, to be made later "
            "(consumer: spend, the spend watch's reads in the poll cycle).",
            ["consumer"],
            registry=r,
        )
        self.budget_unchecked = Counter(
            "rlbot_budget_unchecked",
            "Together requests sent without the budget's books (the database did not answer).",
            ["consumer"],
            registry=r,
        )
        self.budget_tier_spent = Gauge(
            "rlbot_budget_tier_spent",
            "Together requests each budget tier (people|poll|errors|follow|idle) spent in "
            "the window, the whole deployment's, as the books last said.",
            ["tier"],
            registry=r,
        )
        self.budget_tier_floor = Gauge(
            "rlbot_budget_tier_floor",
            "The requests a window kept for each budget tier these settings run.",
            ["tier"],
            registry=r,
        )
        self.poll_plans = Counter(
            "rlbot_poll_plans",
            "Poll cycles by the plan they took: get (one GET per session) or list (pages).",
            ["plan"],
            registry=r,
        )
        self.outbox_depth = Gauge(
            "rlbot_outbox_depth",
            "Outbox messages waiting to be delivered.",
            registry=r,
        )
        self.delivery_attempts = Counter(
            "rlbot_delivery_attempts",
            "Outbox delivery attempts, by outcome: " + "|".join(DELIVERY_OUTCOMES) + ".",
            ["outcome"],
            registry=r,
        )
        self.subscriptions_active = Gauge(
            "rlbot_subscriptions_active",
            "Active channel subscriptions.",
            registry=r,
        )
        self.oncall_alerts = Counter(
            "rlbot_oncall_alerts",
            "Alerts posted to the on-call channel.",
            registry=r,
        )
        self.transitions = Counter(
            "rlbot_transitions",
            "Session status transitions observed, by new status.",
            ["to_status"],
            registry=r,
        )
        self.leases_adopted = Counter(
            "rlbot_leases_adopted",
            "Leases taken over from another replica that stopped (its heartbeat silent or "
            "its lease run out), by work: session|outbox.",
            ["work"],
            registry=r,
        )
        self.lease_takeover_seconds = Histogram(
            "rlbot_lease_takeover_seconds",
            "How long an adopted lease had gone unrenewed when it was taken over: what a "
            "stopped replica's work waited, by work: session|outbox.",
            ["work"],
            buckets=TAKEOVER_BUCKETS,
            registry=r,
        )
        self.lease_renewals = Counter(
            "rlbot_lease_renewals",
            "Leases renewed by the heartbeat of running work, by work: session|outbox.",
            ["work"],
            registry=r,
        )
        self.replica_heartbeats_failed = Counter(
            "rlbot_replica_heartbeats_failed",
            "Heartbeats (spend reports) this replica could not write: past half a lease of "
            "them, the other replicas take its work over.",
            registry=r,
        )

        self.wandb_requests = Counter(
            "rlbot_wandb_requests",
            "Requests to W&B, by HTTP status code, 'error', 'timeout' or 'budget' (refused "
            "unsent: WANDB_REQUESTS_PER_MINUTE was spent).",
            ["status"],
            registry=r,
        )
        self.charts = Counter(
            "rlbot_charts",
            "Charts asked for, by how they ended: uploaded|cached|failed.",
            ["outcome"],
            registry=r,
        )
        self.chart_render_seconds = Histogram(
            "rlbot_chart_render_seconds",
            "Time to draw one chart (off the event loop).",
            buckets=TOGETHER_BUCKETS,
            registry=r,
        )

        # Known label values start at 0, so rate() works from the first scrape.
        for outcome in DELIVERY_OUTCOMES:
            self.delivery_attempts.labels(outcome=outcome)
        for kind in ("list_page", "get"):
            self.poll_requests.labels(kind=kind)
        for work in LEASE_WORK:
            self.leases_adopted.labels(work=work)
            self.lease_renewals.labels(work=work)
        self.wandb_requests.labels(status="budget")
        for outcome in ("uploaded", "cached", "failed"):
            self.charts.labels(outcome=outcome)

    def render(self) -> tuple[bytes, str]:
        """(body, content type) for an HTTP /metrics response."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


_instance: Metrics | None = None
_lock = threading.Lock()


def get_metrics() -> Metrics:
    """The process-wide `Metrics`, created on first use."""
    global _instance
    if _instance is None:
        with _lock:
            if _instance is None:
                _instance = Metrics()
    return _instance
