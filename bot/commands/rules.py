"""`alert`, `alerts` and `budget`: a channel's metric rules and spend budgets
kept (their grammar is `bot.commands.rule_query`), answered only to the person
who asked. The watches judge them (`bot.alerts.metric_rules`, `bot.alerts.budgets`)."""

from __future__ import annotations

from collections.abc import Iterable

from bot import rendering
from bot.commands.asker import Asker, Sessionmaker
from bot.commands.rule_query import BudgetSpec, RuleSpec
from bot.rendering.rules import (
    RuleWords,
    budget_removed,
    budget_set,
    budget_words,
    budgets_full,
    rule_added,
    rules_full,
    rules_list,
    rules_removed,
)
from bot.store.queries.budgets import (
    MAX_BUDGETS,
    channel_budgets,
    channel_progress,
    remove_budget,
    set_budget,
)
from bot.store.queries.metric_rules import (
    MAX_METRIC_RULES,
    add_rule,
    channel_metric_rules,
    remove_rules,
)
from bot.store.queries.watched_sessions import stored_progress
from bot.store.session import Db
from bot.subscriptions.redraw import redraw_card
from bot.training.poll_progress import PollProgress
from bot.training.thresholds import currency_code, same_currency


async def alert_here(*, sessionmaker: Sessionmaker, asker: Asker, spec: RuleSpec) -> str:
    """Add or remove this channel's rules; the answer, `:no_entry_sign:` when refused."""
    async with sessionmaker() as db, db.begin():
        if spec.op is None:
            removed = await remove_rules(
                db,
                team_id=asker.team_id,
                channel_id=asker.channel_id,
                session_id=spec.session_id,
                metric=spec.metric,
            )
            await _redraw(db, asker, spec.session_id, "alert")
            return rules_removed(removed)
        assert spec.metric is not None  # the parser gives a rule its metric
        added = await add_rule(
            db,
            team_id=asker.team_id,
            channel_id=asker.channel_id,
            session_id=spec.session_id,
            metric=spec.metric,
            op=spec.op,
            threshold=spec.threshold,
            hold_seconds=int(spec.hold.total_seconds()),
            page=spec.page,
            created_by=asker.user_id,
        )
        if added:
            await _redraw(db, asker, spec.session_id, "alert")
    if not added:
        return rules_full(MAX_METRIC_RULES)
    return rule_added(
        RuleWords(
            spec.session_id,
            spec.metric,
            spec.op,
            spec.threshold,
            int(spec.hold.total_seconds()),
            spec.page,
        )
    )


async def alerts_here(
    *, sessionmaker: Sessionmaker, asker: Asker, session_id: str | None
) -> rendering.Message:
    async with sessionmaker() as db:
        rules = await channel_metric_rules(
            db, team_id=asker.team_id, channel_id=asker.channel_id, session_id=session_id
        )
        budgets = await channel_budgets(db, team_id=asker.team_id, channel_id=asker.channel_id)
    return rules_list(
        [
            RuleWords(r.session_id, r.metric, r.op, r.threshold, r.hold_seconds, r.page)
            for r in rules
        ],
        [
            budget_words(b.session_id, b.amount, daily=b.daily)
            for b in budgets
            if session_id is None or b.session_id == session_id
        ],
    )


async def budget_here(*, sessionmaker: Sessionmaker, asker: Asker, spec: BudgetSpec) -> str:
    """Set or remove a budget; the answer names the other currencies the spend it
    covers is priced in, as far as the spend watch has read them."""
    async with sessionmaker() as db, db.begin():
        if spec.amount is None:
            gone = await remove_budget(
                db, team_id=asker.team_id, channel_id=asker.channel_id, session_id=spec.session_id
            )
            await _redraw(db, asker, spec.session_id, "budget")
            return budget_removed(gone)
        added = await set_budget(
            db,
            team_id=asker.team_id,
            channel_id=asker.channel_id,
            session_id=spec.session_id,
            amount=spec.amount,
            daily=spec.daily,
            created_by=asker.user_id,
        )
        if not added:
            return budgets_full(MAX_BUDGETS)
        if spec.daily:
            covered = await channel_progress(db, team_id=asker.team_id, channel_id=asker.channel_id)
        else:
            covered = await stored_progress(db, [spec.session_id])
        await _redraw(db, asker, spec.session_id, "budget")
    return budget_set(
        spec.session_id, spec.amount, daily=spec.daily, priced_in=_priced_in(covered.values())
    )


def _priced_in(progress: Iterable[PollProgress]) -> set[str]:
    """The currencies other than the budget's that these sessions are priced in."""
    codes = set()
    for kept in progress:
        price = kept.spend.cost() if kept.spend is not None else None
        if price is not None and not same_currency(price.currency):
            codes.add(currency_code(price.currency))
    return codes


async def _redraw(db: Db, asker: Asker, session_id: str | None, what: str) -> None:
    """The channel's card of the session shows the change at once."""
    await redraw_card(
        db, team_id=asker.team_id, channel_id=asker.channel_id, session_id=session_id, what=what
    )
