"""The rows a budget's level owes and the keys they are told once by: a budget
set anew (after it was replaced, or another given a removed one's id) is told
again; the same judgement repeated writes the same keys. Pure."""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.outbox.contract.payloads import BudgetPayload
from bot.outbox.contract.rows import Thread
from bot.outbox.contract.rule_rows import budget_rows

THREAD = Thread(subscription_id=3, session_id="s1", channel_id="C1", thread_ts="1.000")
SET_AT = datetime(2026, 12, 7, 9, 30, 0, 123456)


def _keys(payload: BudgetPayload, *, set_at: datetime = SET_AT, budget_id: int = 5) -> list[str]:
    rows = budget_rows(
        payload,
        budget_id=budget_id,
        set_at=set_at,
        thread=THREAD,
        muted=False,
        oncall_channel="COPS",
    )
    return [r.dedupe_key for r in rows]


def test_a_budget_set_anew_is_told_again_and_a_repeat_is_not() -> None:
    full = BudgetPayload(level=100, spent=10.5, amount=10.0)
    keys = _keys(full)
    assert len(keys) == 2  # the thread's, and on-call's page
    assert _keys(full) == keys  # the same judgement again: the same keys
    # the same id and amount, set again later (replaced, or an id SQLite gave again)
    later = _keys(full, set_at=SET_AT + timedelta(microseconds=1))
    assert not set(later) & set(keys)
    assert not set(_keys(full, budget_id=6)) & set(keys)
    assert not set(_keys(full.model_copy(update={"level": 80}))) & set(keys)


def test_a_daily_budget_is_told_once_a_day() -> None:
    today = BudgetPayload(level=80, spent=8.0, amount=10.0, daily=True, day="2026-12-07")
    tomorrow = today.model_copy(update={"day": "2026-12-08"})
    assert _keys(today) == _keys(today)
    assert not set(_keys(tomorrow)) & set(_keys(today))
