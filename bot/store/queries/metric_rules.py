"""Metric rules and their state: the queries the `alert` commands and the rule
watch run on `metric_rules` and `metric_rule_states`.

A rule reaches a session through the channel's active subscription to it; a
`*` rule reaches every session the channel is subscribed to, whenever it was
subscribed (a follow rule's too), because the join is made at each judgement.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import delete, func, or_, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.channel_lock import lock_channel_caps
from bot.store.engine import insert_ignoring, upsert
from bot.store.rule_tables import EVERY_SESSION, MetricRule, RuleStateRow
from bot.store.tables import Subscription
from bot.training.thresholds import Op, RuleState

#: the most rules one channel may hold
MAX_METRIC_RULES = 20


class RuleAt(NamedTuple):
    """A rule reaching one subscribed session, with the thread it is told in."""

    rule: MetricRule
    session_id: str
    subscription_id: int
    channel_id: str
    root_ts: str
    muted_until: datetime | None


async def add_rule(
    db: AsyncSession,
    *,
    team_id: str,
    channel_id: str,
    session_id: str,
    metric: str,
    op: Op,
    threshold: float,
    hold_seconds: int,
    page: bool,
    created_by: str,
) -> bool:
    """Add (or change the value of) a rule; False when the channel already holds
    the most rules and this would be a new one. A changed rule starts armed."""
    key = [
        MetricRule.team_id == team_id,
        MetricRule.channel_id == channel_id,
        MetricRule.session_id == session_id,
        MetricRule.metric == metric,
        MetricRule.op == op,
    ]
    existing = (await db.execute(select(MetricRule.id).where(*key))).scalar_one_or_none()
    if existing is None:
        await lock_channel_caps(db, team_id=team_id, channel_id=channel_id)
        held = await db.execute(
            select(func.count())
            .select_from(MetricRule)
            .where(MetricRule.team_id == team_id, MetricRule.channel_id == channel_id)
        )
        if held.scalar_one() >= MAX_METRIC_RULES:
            return False
    values = {
        "team_id": team_id,
        "channel_id": channel_id,
        "session_id": session_id,
        "metric": metric,
        "op": op,
        "threshold": threshold,
        "hold_seconds": hold_seconds,
        "page": page,
        "created_by": created_by,
    }
    await db.execute(
        upsert(db, MetricRule, values, key=["team_id", "channel_id", "session_id", "metric", "op"])
    )
    if existing is not None:
        await db.execute(delete(RuleStateRow).where(RuleStateRow.rule_id == existing))
    return True


async def remove_rules(
    db: AsyncSession, *, team_id: str, channel_id: str, session_id: str, metric: str | None
) -> int:
    """Remove the channel's rules on `session_id` (of `metric` only, when given)."""
    where = [
        MetricRule.team_id == team_id,
        MetricRule.channel_id == channel_id,
        MetricRule.session_id == session_id,
    ]
    if metric is not None:
        where.append(MetricRule.metric == metric)
    ids = list((await db.execute(select(MetricRule.id).where(*where))).scalars())
    if ids:
        await db.execute(delete(RuleStateRow).where(RuleStateRow.rule_id.in_(ids)))
        await db.execute(delete(MetricRule).where(MetricRule.id.in_(ids)))
    return len(ids)


async def channel_metric_rules(
    db: AsyncSession, *, team_id: str, channel_id: str, session_id: str | None = None
) -> list[MetricRule]:
    """The channel's rules, oldest first (on `session_id` only, when given)."""
    where = [MetricRule.team_id == team_id, MetricRule.channel_id == channel_id]
    if session_id is not None:
        where.append(MetricRule.session_id == session_id)
    rows = await db.execute(select(MetricRule).where(*where).order_by(MetricRule.id))
    return list(rows.scalars())


async def rules_reaching(
    db: AsyncSession, session_ids: Collection[str], *, metrics: Collection[str] | None = None
) -> list[RuleAt]:
    """Every rule that reaches one of `session_ids` through an active subscription
    (of `metrics` only, when given): one statement, however many rules."""
    if not session_ids:
        return []
    stmt = (
        select(
            MetricRule,
            Subscription.session_id,
            Subscription.id,
            Subscription.channel_id,
            Subscription.root_ts,
            Subscription.muted_until,
        )
        .join(
            Subscription,
            (Subscription.team_id == MetricRule.team_id)
            & (Subscription.channel_id == MetricRule.channel_id)
            & or_(
                MetricRule.session_id == Subscription.session_id,
                MetricRule.session_id == EVERY_SESSION,
            ),
        )
        .where(Subscription.session_id.in_(list(session_ids)), Subscription.active.is_(True))
        .order_by(MetricRule.id, Subscription.id)
    )
    if metrics is not None:
        stmt = stmt.where(MetricRule.metric.in_(list(metrics)))
    rows = await db.execute(stmt)
    return [RuleAt(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows.all()]


def metrics_by_session(reaching: Sequence[RuleAt]) -> dict[str, set[str]]:
    """The metrics the rules want read of each session."""
    out: dict[str, set[str]] = defaultdict(set)
    for at in reaching:
        out[at.session_id].add(at.rule.metric)
    return dict(out)


async def rule_states(
    db: AsyncSession, keys: Collection[tuple[int, str]]
) -> dict[tuple[int, str], RuleState]:
    """The stored state of each (rule, session); a pair not stored is armed."""
    if not keys:
        return {}
    rows = await db.execute(
        select(RuleStateRow).where(
            tuple_(RuleStateRow.rule_id, RuleStateRow.session_id).in_(list(keys))
        )
    )
    return {
        (r.rule_id, r.session_id): RuleState(since=r.since, fired=r.fired) for r in rows.scalars()
    }


async def write_rule_states(db: AsyncSession, changed: Mapping[tuple[int, str], RuleState]) -> None:
    """Keep the changed states: an armed one is deleted, the rest replaced."""
    if not changed:
        return
    await db.execute(
        delete(RuleStateRow).where(
            tuple_(RuleStateRow.rule_id, RuleStateRow.session_id).in_(list(changed))
        )
    )
    kept = [
        {"rule_id": rule_id, "session_id": sid, "since": state.since, "fired": state.fired}
        for (rule_id, sid), state in changed.items()
        if state != RuleState()
    ]
    if kept:
        await db.execute(insert_ignoring(db, RuleStateRow.__table__), kept)


async def rules_on_cards(
    db: AsyncSession, subscription_ids: Collection[int]
) -> dict[int, list[MetricRule]]:
    """The metric rules each of these subscriptions' cards shows: its channel's rules
    on its session and on every session (`*`), oldest first."""
    if not subscription_ids:
        return {}
    rows = await db.execute(
        select(Subscription.id, MetricRule)
        .join(
            MetricRule,
            (MetricRule.team_id == Subscription.team_id)
            & (MetricRule.channel_id == Subscription.channel_id)
            & or_(
                MetricRule.session_id == Subscription.session_id,
                MetricRule.session_id == EVERY_SESSION,
            ),
        )
        .where(Subscription.id.in_(sorted(subscription_ids)))
        .order_by(MetricRule.id)
    )
    found: dict[int, list[MetricRule]] = defaultdict(list)
    for sub_id, rule in rows:
        found[sub_id].append(rule)
    return dict(found)
