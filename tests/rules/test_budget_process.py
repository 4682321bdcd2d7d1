"""Spend budgets through a real `rl-bot serve` with the Slack- and Together-shaped
servers, where what they add up is the point: a channel's daily budget keeps
counting what a session spent today after that session ended."""

from __future__ import annotations

import json
import time

import pytest

from bot.simulated import FakeSlack, FakeTogether
from bot.simulated.slack import SlackCall
from tests.support import BotFactory, BotProcess, query, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.long("budgets wait for READY time to add up")]

A = "5a3e4567-e89b-12d3-a456-426614174a01"
B = "5a3e4567-e89b-12d3-a456-426614174b02"
RA = "7c3e4567-e89b-12d3-a456-426614174a01"
RB = "7c3e4567-e89b-12d3-a456-426614174b02"
CHANNEL = "C123"
#: the fake's price per GPU group and hour; a resource has two groups (trainer and
#: one generator replica): $3,600/h, a dollar a second of READY time
PRICE = 1800.0


def say(bot: BotProcess, slack: FakeSlack, text: str, channel: str = CHANNEL) -> str:
    token = f"t-{time.monotonic_ns()}"
    r = bot.command(text, response_url=slack.response_url(token), channel_id=channel)
    assert r.status_code == 200, r.text
    return r.text if r.content.strip() else json.dumps(slack.wait_for_response(token))


def told(slack: FakeSlack, words: str, channel: str = CHANNEL) -> list[SlackCall]:
    return [c for c in slack.successful_posts(channel) if words in (c.text or "")]


def spent(db_url: str, session_id: str) -> float:
    """What the bot has seen `session_id` spend so far, in dollars (its READY seconds)."""
    rows = query(
        db_url, "SELECT progress FROM watched_sessions WHERE session_id = :s", s=session_id
    )
    if not rows or rows[0][0] is None:
        return 0.0
    progress = rows[0][0] if isinstance(rows[0][0], dict) else json.loads(rows[0][0])
    return float((progress.get("spend") or {}).get("ready_seconds") or 0.0)


@pytest.mark.backend_independent("what a daily budget adds up, not how the database keeps it")
def test_a_daily_budget_keeps_counting_a_session_that_ended_today(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.prices["H100-80GB"] = PRICE
    together.add_resource(RA, "PENDING")
    together.add_resource(RB, "PENDING")
    together.add(A, "RUNNING", step="10", model_resources_id=RA)
    together.add(B, "RUNNING", step="10", model_resources_id=RB)
    bot = start_bot(SPEND_WATCH="true", SPEND_REFRESH_SECONDS="0")
    for sid in (A, B):
        assert "Subscribed" in say(bot, slack, f"subscribe {sid}")
    assert "a day over every session here" in say(bot, slack, "budget * $20/day")

    # A spends about half the budget today, then ends.
    together.set_resource(RA, "READY")
    wait_until(lambda: spent(db_url, A) >= 9.0, timeout=60, what="A spends $9")
    together.set_resource(RA, "STOPPED")
    together.set_status(A, "STOPPED")
    wait_until(
        lambda: (
            query(db_url, "SELECT active FROM subscriptions WHERE session_id = :s", s=A)
            == [(False,)]
        ),
        what="A's subscription ended",
    )
    spent_a = spent(db_url, A)
    # A alone stays short of the budget (it spends on until the bot reads the stop)
    assert 9.0 <= spent_a < 18.0, spent_a

    # B spends the rest and a little more, short of the budget on its own: only A's
    # spend, counted after A ended, takes the channel to 100 %.
    together.set_resource(RB, "READY")
    wait_until(lambda: spent(db_url, B) >= 21.0 - spent_a, timeout=60, what="B spends the rest")
    together.set_resource(RB, "STOPPED")
    assert spent(db_url, B) < 18.0

    [full] = wait_until(
        lambda: told(slack, "This channel's spend today has reached its budget"),
        timeout=30,
        what="the 100 % warning",
    )
    assert "of $20" in (full.text or "")


@pytest.mark.backend_independent("SQLite is where ids came back; PostgreSQL's store test too")
def test_a_budget_set_after_one_was_removed_is_told(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.prices["H100-80GB"] = PRICE
    together.add_resource(RA, "READY")
    together.add_resource(RB, "PENDING")
    together.add(A, "RUNNING", step="10", model_resources_id=RA)
    together.add(B, "RUNNING", step="10", model_resources_id=RB)
    bot = start_bot(SPEND_WATCH="true", SPEND_REFRESH_SECONDS="0")
    for sid in (A, B):
        assert "Subscribed" in say(bot, slack, f"subscribe {sid}")
    assert "Set a budget $3" in say(bot, slack, f"budget {A} $3")
    wait_until(lambda: told(slack, "has reached its budget"), timeout=60, what="A's budget")
    assert "Budget removed" in say(bot, slack, f"budget {A} off")
    # the same amount on another session: a new budget, told as any other
    assert "Set a budget $3" in say(bot, slack, f"budget {B} $3")
    together.set_resource(RB, "READY")
    wait_until(
        lambda: len(told(slack, "has reached its budget")) == 2, timeout=60, what="B's budget"
    )
    [(told_level,)] = query(db_url, "SELECT told_level FROM budgets")
    assert told_level == 100


def root_of(slack: FakeSlack, session_id: str) -> str | None:
    return next(
        c.ts
        for c in slack.successful_posts(CHANNEL)
        if c.thread_ts is None and c.ts and session_id in (c.text or "")
    )


def card_of(slack: FakeSlack, session_id: str) -> str:
    root = root_of(slack, session_id)
    assert root is not None
    updates = slack.updates(CHANNEL, root)
    return (
        json.dumps(updates[-1].blocks, ensure_ascii=False).replace("\u2060", "") if updates else ""
    )


@pytest.mark.backend_independent("what a budget adds and compares, not how it is stored")
def test_budgets_never_add_or_compare_amounts_in_another_currency(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.prices |= {"H100-80GB": PRICE, "B200-SXM": PRICE}
    together.currencies["B200-SXM"] = "EUR"
    together.add_resource(
        RA, "READY", compute_config={"gpu_type": "B200-SXM", "num_generator_replicas": 1}
    )
    together.add_resource(RB, "PENDING")
    together.add(A, "RUNNING", step="10", model_resources_id=RA)
    together.add(B, "RUNNING", step="10", model_resources_id=RB)
    bot = start_bot(SPEND_WATCH="true", SPEND_REFRESH_SECONDS="0")
    for sid in (A, B):
        assert "Subscribed" in say(bot, slack, f"subscribe {sid}")
    wait_until(lambda: "EUR" in card_of(slack, A), what="A's card priced in EUR")
    answer = say(bot, slack, f"budget {A} $3")
    assert "priced in EUR" in answer and "not compared" in answer, answer
    assert "not added" in say(bot, slack, "budget * $8/day")
    together.set_resource(RB, "READY")

    # B's dollars alone reach the daily budget; A's euros are named apart, never added.
    [full] = wait_until(
        lambda: told(slack, "This channel's spend today has reached its budget"),
        timeout=60,
        what="the daily budget reached",
    )
    words = (full.text or "").replace("\u2060", "")
    assert "of $8.00" in words and "EUR of" not in words, words
    assert "EUR" in words and "not added" in words, words
    assert spent(db_url, B) >= 8.0
    # A's euros passed its $3 long ago: never compared with it, and its card says so
    assert spent(db_url, A) > 3.0 / 0.8
    in_a = [c for c in told(slack, "of its budget") if c.thread_ts == root_of(slack, A)]
    assert not in_a, [c.text for c in in_a]
    card = say(bot, slack, f"show {A}").replace("\\u2060", "")
    assert "EUR; the $3.00 budget is in dollars: not compared" in card, card
    assert "3.00 EUR budget" not in card


@pytest.mark.backend_independent("the answer's words and the cap's count, not the database")
def test_alerts_lists_every_rule_and_budget_and_budgets_are_capped(
    start_bot: BotFactory, slack: FakeSlack
) -> None:
    bot = start_bot()
    rules, budgets = 20, 50
    for i in range(rules):
        metric = f"rule_{i:02d}_" + "x" * 50
        assert "Rule" in say(bot, slack, f"alert * {metric} &gt; {i} for 10m page")
    assert "Set a budget" in say(bot, slack, "budget * $500/day")
    ids = [f"5a3e4567-e89b-12d3-a456-{i:012d}" for i in range(budgets - 1)]
    for sid in ids:
        assert "Set a budget" in say(bot, slack, f"budget {sid} $1,000")
    refused = say(bot, slack, "budget 5a3e4567-e89b-12d3-a456-999999999999 $5")
    assert f"already has {budgets} budgets" in refused, refused
    assert "Set a budget" in say(bot, slack, f"budget {ids[0]} $2,000")  # held: may change

    listed = json.loads(say(bot, slack, "alerts"))
    shown = "\n".join(
        b["text"]["text"] for b in listed["blocks"] if b.get("type") == "section"
    ).replace("\u2060", "")
    for i in range(rules):
        assert f"rule_{i:02d}_" in shown, i
    for sid in ids:
        assert sid in shown, sid
    assert "$500 a day over every session here" in shown
    assert "999999999999" not in shown
    assert listed["text"] == f"{rules} rules and {budgets} budgets"
