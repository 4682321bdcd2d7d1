"""Everything a running bot holds: one engine, one HTTP client, one Slack client.

Built once by the CLI and handed to the web app, the listeners and the
scheduler, so tests can build one against local servers.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import httpx
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.ops.metrics import Metrics, get_metrics, status_code_label
from bot.settings.model import Settings
from bot.slack_web import SlackWeb
from bot.slack_web.retry import SlackRateLimitRetry
from bot.store.engine import make_engine, make_sessionmaker
from bot.store.queries.together_grants import reserve
from bot.store.session import Engine, Sessionmaker
from bot.together.budget import Ledger
from bot.together.client import TogetherClient
from bot.together.gate import GRANT_SECONDS, SLICES, Booked, Decide, Gate
from bot.together.list_pass import Lister
from bot.together.resource_cache import ResourceCache
from bot.together.shares import Shares, running_tiers
from bot.wandb.client import WandbClient

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    settings: Settings
    engine: Engine
    sessionmaker: Sessionmaker
    http: httpx.AsyncClient
    together: TogetherClient
    slack: SlackWeb
    # Delivery has its own dedupe check, so its client must not retry a post
    # that Slack may already have accepted (a 500 after the write).
    delivery_slack: SlackWeb
    metrics: Metrics
    # One per process: the list passes every consumer shares (poller, error watch, ls).
    lister: Lister
    # Rung by whoever writes outbox rows (a poll, a watch, a command's fresh fetch):
    # the delivery loop sends them now rather than at its next tick.
    deliver_soon: asyncio.Event = field(default_factory=asyncio.Event)
    # One per process: model resources and prices read lately, shared by the
    # spend watch and the cards people ask for.
    resources: ResourceCache = field(default_factory=ResourceCache)
    # None without WANDB_API_KEY: charts then show only the bot's own progress.
    wandb: WandbClient | None = None

    @property
    def owner(self) -> str:
        return self.settings.replica_id

    async def aclose(self) -> None:
        await self.http.aclose()
        await self.engine.dispose()


def _secret(value: object) -> str:
    getter = getattr(value, "get_secret_value", None)
    return str(getter()) if getter is not None else ""


def build_runtime(settings: Settings, *, http: httpx.AsyncClient | None = None) -> Runtime:
    metrics = get_metrics()
    engine = make_engine(settings.database_url)
    limits = httpx.Limits(
        max_connections=max(settings.poll_concurrency * 2, 32),
        max_keepalive_connections=max(settings.poll_concurrency * 2, 32),
    )
    http = http or httpx.AsyncClient(limits=limits, timeout=settings.together_timeout_seconds)

    def observe(label: str, seconds: float) -> None:
        metrics.together_requests.labels(status=status_code_label(label)).inc()
        metrics.together_request_seconds.observe(seconds)

    def spent(kind: str, consumer: str) -> None:
        metrics.together_spent.labels(kind=kind, consumer=consumer).inc()

    # The budget is per minute, counted over a minute (the tests' setting aside); a
    # poll interval longer than that is a longer window.
    window = max(settings.together_budget_window_seconds, settings.poll_interval_seconds)
    sessionmaker = make_sessionmaker(engine)
    together = TogetherClient(
        http,
        base_url=settings.together_base_url,
        api_key=_secret(settings.together_api_key),
        max_rps=settings.together_max_rps,
        timeout=settings.together_timeout_seconds,
        observe=observe,
        max_response_bytes=settings.together_max_response_bytes,
        ledger=Ledger(window=window, on_spend=spent),
        gate=budget_gate(settings, sessionmaker, metrics, window=window),
    )
    token = _secret(settings.slack_bot_token)
    slack = SlackWeb(
        AsyncWebClient(
            token=token,
            base_url=settings.slack_api_base,
            timeout=10,
            retry_handlers=[
                AsyncConnectionErrorRetryHandler(max_retry_count=2),
                SlackRateLimitRetry(max_retry_count=2),
                AsyncServerErrorRetryHandler(max_retry_count=2),
            ],
        )
    )
    delivery_slack = SlackWeb(
        AsyncWebClient(token=token, base_url=settings.slack_api_base, timeout=10, retry_handlers=[])
    )
    return Runtime(
        wandb=_wandb(settings, http, metrics),
        settings=settings,
        engine=engine,
        sessionmaker=sessionmaker,
        http=http,
        together=together,
        slack=slack,
        delivery_slack=delivery_slack,
        metrics=metrics,
        lister=Lister(together),
    )


def budget_gate(
    settings: Settings, sessionmaker: Sessionmaker, metrics: Metrics, *, window: float
) -> Gate:
    """The request budget's gate over the deployment's books in the database: the
    budget of a slice of the `window` (TOGETHER_REQUESTS_PER_MINUTE scaled to it),
    counted over the slice and the time a grant may take to be sent."""
    slice_seconds = window / SLICES
    shares = Shares.of(
        settings.together_requests_per_minute * slice_seconds / 60.0,
        running_tiers(settings),
        poll_share=settings.poll_budget_share,
    )
    for tier, floor in shares.floors.items():
        metrics.budget_tier_floor.labels(tier=tier.value).set(floor)
    owner = settings.replica_id

    async def book(tier: str, decide: Decide, waits: bool) -> Booked:
        async with sessionmaker() as db, db.begin():
            got = await reserve(
                db,
                owner=owner,
                tier=tier,
                window_seconds=slice_seconds + GRANT_SECONDS,
                decide=decide,
                waits=waits,
            )
        for name, n in got.spent.items():
            metrics.budget_tier_spent.labels(tier=name).set(
                n + (got.granted if name == tier else 0)
            )
        return Booked(got.granted, got.spent, got.retry_in)

    def observe(consumer: str, what: str, seconds: float) -> None:
        if what == "wait":
            metrics.budget_waited.labels(consumer=consumer).inc()
            metrics.budget_wait_seconds.labels(consumer=consumer).inc(seconds)
        elif what == "refused":
            metrics.budget_refused.labels(consumer=consumer).inc()
        else:
            metrics.budget_unchecked.labels(consumer=consumer).inc()

    return Gate(shares, book, window=slice_seconds + GRANT_SECONDS, observe=observe)


def _wandb(settings: Settings, http: httpx.AsyncClient, metrics: Metrics) -> WandbClient | None:
    """W&B's client, when a key is set: the same deadline and byte cap as Together's."""
    key = settings.wandb_key
    if key is None:
        return None

    def observe(label: str, seconds: float) -> None:
        metrics.wandb_requests.labels(status=status_code_label(label)).inc()

    return WandbClient(
        http,
        base_url=settings.wandb_base_url,
        api_key=key,
        timeout=settings.together_timeout_seconds,
        max_response_bytes=settings.together_max_response_bytes,
        per_minute=settings.wandb_requests_per_minute,
        observe=observe,
    )
