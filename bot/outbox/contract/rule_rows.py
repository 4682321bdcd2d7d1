"""The outbox rows a metric rule's crossing and a budget's level owe.

Each key names what is told exactly once: a rule's crossing by the rule, the
session and when the crossing began; a budget's level by the budget as set
(its id and when it was set, so a replaced budget is told anew), the level and
(a daily budget) the local day. A judgement repeated
after a crash or by another replica writes the same keys, so nothing is told
twice.
"""

from __future__ import annotations

from datetime import datetime

from bot.outbox.contract.payloads import BudgetPayload, ChartPayload, RulePayload
from bot.outbox.contract.rows import OutboxRow, Thread, bounded_key


def rule_rows(
    payload: RulePayload,
    *,
    rule_id: int,
    thread: Thread,
    muted: bool,
    oncall_channel: str | None,
) -> list[OutboxRow]:
    """The crossing in the thread (with a chart of the metric) unless it is
    muted, and on-call's page when the rule pages."""
    crossing = (str(rule_id), thread.session_id, payload.since.isoformat())
    rows: list[OutboxRow] = []
    if not muted:
        rows.append(_in_thread(thread, bounded_key("rule", *crossing), payload))
        chart = ChartPayload(reason="rule", session=payload.session, metrics=[payload.metric])
        rows.append(_in_thread(thread, bounded_key("chart", "rule", *crossing), chart))
    if payload.page and oncall_channel:
        rows.append(
            OutboxRow(
                dedupe_key=bounded_key("rule-page", *crossing),
                channel_id=oncall_channel,
                payload=payload.model_copy(
                    update={"thread_channel": thread.channel_id, "thread_ts": thread.thread_ts}
                ),
                session_id=thread.session_id,
            )
        )
    return rows


def budget_rows(
    payload: BudgetPayload,
    *,
    budget_id: int,
    set_at: datetime,
    thread: Thread,
    muted: bool,
    oncall_channel: str | None,
) -> list[OutboxRow]:
    """A budget's level in the thread (a daily budget: in the channel) unless
    muted, and at 100 % on-call's page."""
    told = (str(budget_id), set_at.isoformat(), str(payload.level), payload.day or "-")
    rows: list[OutboxRow] = []
    if not muted:
        here = payload.model_copy(update={"page": False})
        if payload.daily:  # the channel's, not one thread's
            rows.append(
                OutboxRow(
                    dedupe_key=bounded_key("budget", *told),
                    channel_id=thread.channel_id,
                    payload=here,
                )
            )
        else:
            rows.append(_in_thread(thread, bounded_key("budget", *told), here))
    if payload.level >= 100 and oncall_channel:
        rows.append(
            OutboxRow(
                dedupe_key=bounded_key("budget-page", *told),
                channel_id=oncall_channel,
                payload=payload.model_copy(
                    update={
                        "page": True,
                        "thread_channel": thread.channel_id,
                        "thread_ts": None if payload.daily else thread.thread_ts,
                    }
                ),
                session_id=thread.session_id,
            )
        )
    return rows


def _in_thread(
    thread: Thread, key: str, payload: RulePayload | BudgetPayload | ChartPayload
) -> OutboxRow:
    return OutboxRow(
        dedupe_key=key,
        channel_id=thread.channel_id,
        payload=payload,
        subscription_id=thread.subscription_id,
        session_id=thread.session_id,
        thread_ts=thread.thread_ts,
    )
