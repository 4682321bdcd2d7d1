"""Delivery: send due outbox rows to Slack, once each.

A row is claimed (leased, attempts + 1), fenced, sent, then marked. The fence
is the promise between replicas: just before each post the lease is renewed by
the database's clock, and only if this replica still holds it (a batch can
outlive its lease when Slack is slow; another replica may have taken the rest).
The mark only touches a row that is still pending and still ours, so neither a
cancelled row nor another replica's row is ever changed by a late result.

If the process dies between Slack accepting the post and storing it, the row is
claimed again after its lease; a row with an earlier attempt first looks for
its own dedupe key in the thread's message metadata and, if Slack already has
it, is marked sent without posting again. That is what makes at-least-once
delivery tell each transition exactly once.

A row is sent in two steps: its post, stored the moment Slack takes it, and
its root card's redraw, retried on its own when Slack refuses it (a rate
limit, a server error), so a refused redraw never posts the message again.

Leases are short: while a batch is being sent, a heartbeat renews the leases
of its rows not yet done (`queue.renew`), and a row whose holder's heartbeat
stopped is taken over at once (`claim_due`); the fence is what keeps either
from ever sending a row twice.

This is the loop over due rows; its steps are their own modules: sending one
row (`send`), the duplicate check (`duplicates`), the message (`messages`), the
root card (`root_update`), what Slack's answers mean (`outcome`) and the mark
(`record`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import timedelta

from bot.alerts.stall import threshold
from bot.delivery.chart import send_chart
from bot.delivery.outcome import LOST, SendResult, give_up, retry_later
from bot.delivery.record import posted_mark, record, record_posted
from bot.delivery.root_update import INVALID_BLOCKS
from bot.delivery.routing import thread_modes
from bot.delivery.send import draws_from_store, post_one, posts_message, redraw_root
from bot.ops.faults import crash_point
from bot.ops.metrics import Metrics
from bot.outbox.contract.payloads import ChartPayload, Kind, OncallPayload
from bot.outbox.contract.rows import State
from bot.outbox.order import UPDATING
from bot.outbox.queue import claim_due, fence, hand_back, renew
from bot.outbox.table import OutboxMessage
from bot.rendering.root_card import CardExtras, card_chart, metric_lines
from bot.rendering.rules import RuleWords, rule_words
from bot.runtime import Runtime
from bot.settings.model import Settings
from bot.slack_web import SlackWeb
from bot.slack_web.refusals import AUTH_ERRORS
from bot.store.heartbeats import held_for, renew_while
from bot.store.queries.audience import muted_now
from bot.store.queries.chart_refusals import remember_refusal
from bot.store.queries.metric_rules import rules_on_cards
from bot.store.queries.subscriptions import card_settings
from bot.store.session import Db, Sessionmaker
from bot.store.tables import database_now
from bot.together.client import TogetherClient
from bot.training.poll_progress import CardView, PollProgress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delivery:
    """What sending the outbox takes: the database, Slack, the settings and this
    replica's name; Together, when given, for what a message is better with (a slow
    start's place in the GPU queue); the runtime, for chart rows (W&B, the chart
    cache). A running bot's is `Delivery.of(rt)`; a test gives only what it has."""

    sessionmaker: Sessionmaker
    slack: SlackWeb
    settings: Settings
    owner: str
    metrics: Metrics | None = None
    together: TogetherClient | None = None
    runtime: Runtime | None = None

    @classmethod
    def of(cls, rt: Runtime) -> Delivery:
        return cls(
            sessionmaker=rt.sessionmaker,
            slack=rt.delivery_slack,
            settings=rt.settings,
            owner=rt.owner,
            metrics=rt.metrics,
            together=rt.together,
            runtime=rt,
        )


async def deliver_due(delivery: Delivery, *, limit: int = 500) -> list[SendResult]:
    """Claim, fence and send the due rows."""
    sessionmaker, settings = delivery.sessionmaker, delivery.settings
    owner, metrics = delivery.owner, delivery.metrics
    async with sessionmaker() as db, db.begin():
        rows = await claim_due(
            db,
            owner=owner,
            limit=limit,
            lease_seconds=settings.lease_seconds,
            channel_gap=settings.channel_min_interval_seconds,
            routine_per_minute=settings.card_redraws_per_minute,
        )
        extras = await card_extras(db, rows, settings=settings) if rows else {}
        adopted = [r for r in rows if r.lease_owner is not None and r.lease_owner != owner]
        now = await database_now(db) if adopted else None
        modes = await thread_modes(db, rows) if rows else {}
    if not rows:
        return []
    if adopted:
        waited = [held_for(r.lease_until, now, settings.lease_seconds) for r in adopted]
        log.warning(
            "took over %d outbox rows from replicas that stopped (their leases not renewed "
            "for up to %.1fs)",
            len(adopted),
            max(waited),
            extra={"from": sorted({str(r.lease_owner) for r in adopted})},
        )
        if metrics is not None:
            metrics.leases_adopted.labels(work="outbox").inc(len(adopted))
            for seconds in waited:
                metrics.lease_takeover_seconds.labels(work="outbox").observe(seconds)
    crash_point("deliver_after_claim", settings.fault_crash_at)
    semaphore = asyncio.Semaphore(settings.delivery_concurrency)
    unfinished = {r.id for r in rows}
    unfenced: list[int] = []

    async def one(row: OutboxMessage) -> SendResult:
        try:
            async with semaphore:
                return await _deliver_one(
                    row,
                    delivery,
                    extras=extras.get(row.subscription_id or 0),
                    mode=modes.get(row.subscription_id or 0),
                )
        except Exception as exc:  # the fence could not reach the database: nothing sent
            log.warning(
                "could not fence an outbox row; handing it back: %s",
                type(exc).__name__,
                extra={"outbox_id": row.id},
            )
            unfenced.append(row.id)
            return retry_later(row, None, "database_unreachable")
        finally:
            unfinished.discard(row.id)

    renewing = asyncio.create_task(_keep_leases(delivery, unfinished))
    try:
        outcomes = await asyncio.gather(*(one(r) for r in rows))
    finally:
        renewing.cancel()
    if unfenced:
        try:
            async with sessionmaker() as db, db.begin():
                await hand_back(db, unfenced, owner=owner)
        except Exception as exc:  # still away: the leases run out instead
            log.warning("could not hand back unfenced outbox rows: %s", type(exc).__name__)
    if metrics is not None:
        for row, o in zip(rows, outcomes, strict=True):  # gather keeps the order
            label = (
                "duplicate_skipped"
                if o.duplicate
                else {State.PENDING: "retry", LOST: "lease_lost"}.get(o.state, o.state)
            )
            if o.error in AUTH_ERRORS:
                label = "auth_error"
            metrics.delivery_attempts.labels(outcome=label).inc()
            if (
                o.state == State.SENT
                and not o.duplicate
                and isinstance(row.typed_payload, OncallPayload)
            ):
                metrics.oncall_alerts.inc()
    return outcomes


async def _keep_leases(delivery: Delivery, unfinished: set[int]) -> None:
    """Renew the leases of the batch's rows not yet done, every third of a lease."""
    sessionmaker, owner = delivery.sessionmaker, delivery.owner
    settings, metrics = delivery.settings, delivery.metrics

    async def once() -> None:
        async with sessionmaker() as db, db.begin():
            n = await renew(
                db, sorted(unfinished), owner=owner, lease_seconds=settings.lease_seconds
            )
        if metrics is not None:
            metrics.lease_renewals.labels(work="outbox").inc(n)

    await renew_while(once, lease_seconds=settings.lease_seconds, what="outbox")


#: kinds whose delivery redraws the subscription's root card
_ROOT_KINDS = frozenset(UPDATING)


async def card_extras(
    db: Db, rows: list[OutboxMessage], *, settings: Settings
) -> dict[int, CardExtras]:
    """What the root cards of these rows show beyond the session, by subscription:
    the watch's current state, the thread's `target=` and stall threshold. One
    read for the whole batch, so every redraw renders from the same state."""
    ids = sorted(
        {r.subscription_id for r in rows if r.subscription_id is not None and r.kind in _ROOT_KINDS}
    )
    if not ids:
        return {}
    found = await card_settings(db, ids)
    rules = await rules_on_cards(db, ids)
    minutes = settings.stall_after_minutes
    default = timedelta(minutes=minutes) if minutes > 0 else None
    return {
        r.id: CardExtras(
            progress=CardView.of(r.progress or PollProgress(), budget=r.amount),
            target=r.target_step,
            stall_after=threshold(r.stall_after_minutes, default),
            metrics=metric_lines(r.view, settings.wandb_metrics),
            chart=card_chart(r.view) if r.refused is None else None,
            team_id=r.team_id,
            stored=r.snapshot,
            active=bool(r.active),
            muted_until=r.muted_until,
            rules=tuple(
                rule_words(
                    RuleWords(x.session_id, x.metric, x.op, x.threshold, x.hold_seconds, x.page),
                    with_session=False,
                )
                for x in rules.get(r.id, ())
            ),
        )
        for r in found
    }


async def _deliver_one(
    row: OutboxMessage,
    delivery: Delivery,
    *,
    extras: CardExtras | None = None,
    mode: str | None = None,
) -> SendResult:
    """Fence, send, mark: each row on its own, so a slow batch never outlives a lease
    unnoticed and each result is stored as soon as it is known."""
    sessionmaker, settings, owner = delivery.sessionmaker, delivery.settings, delivery.owner
    runtime = delivery.runtime
    extra = {"outbox_id": row.id, "channel_id": row.channel_id}
    async with sessionmaker() as db, db.begin():
        held = await fence(db, row.id, owner=owner, lease_seconds=settings.lease_seconds)
        muted = held and await _muted(db, row)
    if not held:
        log.info("outbox row no longer leased to this replica; not sending it", extra=extra)
        return SendResult(row.id, LOST)
    try:
        payload = row.typed_payload
        if muted and row.kind not in _ROOT_KINDS:
            log.info("the thread is muted; not telling it", extra=extra)
            outcome = SendResult(row.id, State.CANCELLED, error="muted")
        elif muted:  # the card still shows it; the thread hears nothing
            outcome = await redraw_root(
                row, slack=delivery.slack, extras=extras, from_store=draws_from_store(row)
            )
        elif isinstance(payload, ChartPayload):
            outcome = (
                await send_chart(row, payload, runtime=runtime, slack=delivery.slack)
                if runtime is not None
                else SendResult(row.id, State.DEAD, error="no_runtime")  # charts need W&B, cache
            )
        else:
            outcome = await _send(row, delivery, extras=extras, mode=mode)
    except Exception as exc:  # never lose the row to a bug: retry it later
        log.exception("delivery failed unexpectedly", extra=extra)
        outcome = retry_later(row, None, type(exc).__name__)
        outcome.sent_ts = row.sent_ts  # a post that went out is kept
    outcome = give_up(row, outcome, settings.delivery_max_attempts)
    try:
        async with sessionmaker() as db, db.begin():
            await record(db, row, outcome, owner=owner, oncall_channel=settings.oncall_channel)
    except Exception:
        # The lease runs out; the next attempt finds a sent message by its dedupe key.
        log.exception("could not record a delivery result", extra=extra)
    return outcome


#: what a muted thread does not hear, whenever it was queued (on-call's pages go
#: to their own channel, with no subscription, and are told all the same)
_QUIET_WHEN_MUTED = frozenset(
    {
        Kind.TRANSITION,
        Kind.CHECKPOINTS,
        Kind.PROGRESS,
        Kind.CHART,
        Kind.METRIC,
        Kind.RULE,
        Kind.BUDGET,
        Kind.IDLE,
    }
)


async def _muted(db: Db, row: OutboxMessage) -> bool:
    """Whether the row is told in a thread that is muted now (checked at the send,
    not when the row was queued: a thread muted since hears nothing more)."""
    if row.subscription_id is None or row.kind not in _QUIET_WHEN_MUTED or row.sent_ts:
        return False
    return await muted_now(db, row.subscription_id)


async def _send(
    row: OutboxMessage, delivery: Delivery, *, extras: CardExtras | None, mode: str | None = None
) -> SendResult:
    """The post (unless an earlier attempt made it), stored the moment Slack takes
    it; then the root card, whose refusal retries the card alone."""
    sessionmaker, slack, settings = delivery.sessionmaker, delivery.slack, delivery.settings
    duplicate = False
    from_store = draws_from_store(row)
    if posts_message(row):
        posted = await post_one(row, delivery, mode=mode)
        if posted.state != State.SENT:
            return posted
        crash_point("deliver_after_post", settings.fault_crash_at)
        duplicate = posted.duplicate
        row.sent_ts = posted_mark(row, posted.sent_ts)
        try:
            async with sessionmaker() as db, db.begin():
                owed = await record_posted(db, row, row.sent_ts, owner=delivery.owner)
        except Exception:
            log.exception(
                "could not store a post; its root card is redrawn all the same",
                extra={"outbox_id": row.id, "channel_id": row.channel_id},
            )
            owed = True
        if not owed:  # cancelled or taken over while the post was in flight
            return SendResult(row.id, State.SENT, sent_ts=row.sent_ts, duplicate=duplicate)
    outcome = await redraw_root(row, slack=slack, extras=extras, from_store=from_store)
    crash_point("deliver_after_update", settings.fault_crash_at)
    outcome.duplicate = duplicate
    if outcome.chart_refused and extras is not None and extras.team_id:
        await _remember_chart_refusal(sessionmaker, extras.team_id, row)
    return outcome


async def _remember_chart_refusal(
    sessionmaker: Sessionmaker, team_id: str, row: OutboxMessage
) -> None:
    """The workspace's cards are drawn without the chart from now on; a failed
    write only means the next redraw is refused once more."""
    try:
        async with sessionmaker() as db, db.begin():
            now = await database_now(db)
            await remember_refusal(db, team_id, error=INVALID_BLOCKS, now=now)
    except Exception:
        log.exception(
            "could not remember a refused chart",
            extra={"outbox_id": row.id, "channel_id": row.channel_id},
        )
    else:
        log.warning(
            "Slack refused the card's chart block; this workspace's cards go without it",
            extra={"team_id": team_id, "channel_id": row.channel_id},
        )
