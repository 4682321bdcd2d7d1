"""The budget watch: each poll's spend reads judged against the channels'
budgets (a session's, and a channel's daily one), the 80 % and 100 % warnings
written with the budget's new state in the poll's own transaction.

The spend is the card's estimate (price × READY time the bot saw); the
forecast is that price per hour while the resource is READY. A daily budget
sums, over every session the channel was subscribed to today, what the bot saw
each one spend since local midnight in DEFAULT_TIMEZONE: a session that ended
(or was unsubscribed) keeps counting what it spent today. Budgets are in
dollars: a spend priced in another currency is never added to or compared with
one (a daily warning names it apart).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from bot.outbox.contract.payloads import BudgetPayload
from bot.outbox.contract.rows import OutboxRow, Thread
from bot.outbox.contract.rule_rows import budget_rows
from bot.outbox.queue import insert_outbox
from bot.store.queries.audience import muted_until
from bot.store.queries.budgets import budgets_reaching, channel_progress, keep_budget_state
from bot.store.queries.watch_state import snapshot_of
from bot.store.session import Db
from bot.training.poll_progress import SpendRead
from bot.training.rules import estimated_spend
from bot.training.snapshots import SessionSnapshot
from bot.training.status import ResourceStatus
from bot.training.thresholds import (
    BUDGET_CURRENCY,
    DailySpend,
    budget_level,
    daily_spend,
    reaches_at,
    same_currency,
)


def spend_of(spend: SpendRead | None) -> tuple[float, float, str] | None:
    """The estimate so far, the price per hour while it runs on (0 unless READY),
    and the currency; None without a price (pure)."""
    if spend is None:
        return None
    price = spend.cost()
    if price is None or price.price_per_hour is None:
        return None
    spent = estimated_spend(spend.ready_seconds or 0.0, price.price_per_hour)
    if spent is None:
        return None
    ready = spend.status == ResourceStatus.READY.value
    return spent, price.price_per_hour if ready else 0.0, price.currency


async def judge_budgets(
    db: Db,
    updates: Mapping[str, Mapping[str, Any]],
    *,
    now: datetime,
    zone: str,
    oncall_channel: str | None,
) -> int:
    """Judge the budgets these polls touch; returns the outbox rows written."""
    polled = {sid for sid, values in updates.items() if "progress" in values}
    reaching = await budgets_reaching(db, polled) if polled else []
    rows: list[OutboxRow] = []
    for at in reaching:
        budget = at.budget
        if budget.daily:
            progress = await channel_progress(
                db, team_id=budget.team_id, channel_id=budget.channel_id
            )
            costs: dict[str, float] = {}
            currencies: dict[str, str] = {}
            per_hour = 0.0
            for sid, kept in progress.items():
                found = spend_of(kept.spend)
                if found is not None:
                    costs[sid], rate, currencies[sid] = found
                    per_hour += rate if same_currency(currencies[sid]) else 0.0
            prev = None
            if budget.day and isinstance(budget.baseline, dict):
                prev = DailySpend.of_stored(date.fromisoformat(budget.day), budget.baseline)
            count = daily_spend(prev, costs, now=now, zone=zone, currencies=currencies)
            spent, others = count.spent(), count.others()
            told = budget.told_level if prev is not None and prev.day == count.day else 0
            day: date | None = count.day
            baseline: dict[str, Any] | None = count.stored()
        else:
            found = spend_of(updates[at.session_id]["progress"].spend)
            if found is None:
                continue
            spent, per_hour, priced_in = found
            if not same_currency(priced_in):
                continue  # never compared: the card says so
            told, day, baseline, others = budget.told_level, None, None, {}
        level = budget_level(spent, budget.amount)
        if level > told:
            payload = BudgetPayload(
                level=level,
                spent=spent,
                amount=budget.amount,
                daily=budget.daily,
                day=day.isoformat() if day is not None else None,
                per_hour=per_hour or None,
                reaches_at=reaches_at(
                    spent, budget.amount, per_hour, now, day_ends_in=zone if budget.daily else None
                ),
                currency=BUDGET_CURRENCY,
                others=others,
                session=None if budget.daily else await _snapshot(db, at.session_id),
                resource_id=None if budget.daily else _resource(updates[at.session_id]),
            )
            muted = not budget.daily and await _muted(db, at.subscription_id, now)
            thread = Thread(at.subscription_id, at.session_id, budget.channel_id, at.root_ts)
            rows += budget_rows(
                payload,
                budget_id=budget.id,
                set_at=budget.created_at,
                thread=thread,
                muted=muted,
                oncall_channel=oncall_channel,
            )
        new_told = max(level, told)
        moved = day is not None and (budget.day != day.isoformat() or budget.baseline != baseline)
        if new_told != budget.told_level or moved:
            await keep_budget_state(db, budget.id, told_level=new_told, day=day, baseline=baseline)
    await insert_outbox(db, rows)
    return len(rows)


def _resource(values: Mapping[str, Any]) -> str | None:
    spend = values["progress"].spend
    return spend.resource_id if spend is not None else None


async def _snapshot(db: Db, session_id: str) -> SessionSnapshot | None:
    return await snapshot_of(db, session_id)


async def _muted(db: Db, subscription_id: int, now: datetime) -> bool:
    until = await muted_until(db, subscription_id)
    return until is not None and until > now
