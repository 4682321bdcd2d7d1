"""Budgets are in dollars (`$200`); a resource may be priced in another currency.
Amounts in different currencies are never added or compared, and the person is
told so where it matters: the daily count, its warning, the card, the answer to
`budget`. Pure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.rendering.blocks import Message
from bot.rendering.rules import budget_alert, budget_set
from bot.rendering.terminal import as_text
from bot.rendering.watch import WatchFacts, watch_blocks
from bot.simulated.together import make_model_resource
from bot.training.resources import CostEstimate, ModelResource
from bot.training.thresholds import BUDGET_CURRENCY, DailySpend, daily_spend, same_currency

NOW = datetime(2026, 12, 7, 12, 0)
SID = "123e4567-e89b-12d3-a456-426614174000"


def text(message: Message | dict[str, Any]) -> str:
    return as_text(message).replace("*", "").replace("\u2060", "")


def test_budgets_are_in_dollars_and_currency_codes_are_read_loosely() -> None:
    assert BUDGET_CURRENCY == "USD"
    assert same_currency("usd") and same_currency(" USD ") and same_currency(None)
    assert same_currency("") and not same_currency("EUR")


def test_a_daily_count_adds_only_dollars_and_keeps_the_rest_apart() -> None:
    count = daily_spend(
        None, {"a": 0.0, "b": 0.0}, now=NOW, zone="UTC", currencies={"a": "EUR", "b": "USD"}
    )
    count = daily_spend(
        count, {"a": 85.0, "b": 85.0}, now=NOW, zone="UTC", currencies={"a": "EUR", "b": "USD"}
    )
    assert count.spent() == 85.0  # not 170
    assert count.others() == {"EUR": 85.0}
    # a session that ended keeps its currency too, through what is stored
    later = daily_spend(
        DailySpend.of_stored(count.day, count.stored()), {"b": 90.0}, now=NOW, zone="UTC"
    )
    assert later.spent() == 90.0 and later.others() == {"EUR": 85.0}


def test_the_daily_warning_says_what_it_did_not_add() -> None:
    message = budget_alert(
        "This channel's spend today",
        level=100,
        spent=110.0,
        amount=100.0,
        per_hour=None,
        reaches_at=None,
        currency="USD",
        now=NOW,
        others={"EUR": 85.0},
    )
    shown = text(message)
    assert "$110 of $100" in shown
    assert "85.00 EUR" in shown and "not added" in shown
    plain = budget_alert(
        "x",
        level=80,
        spent=80.0,
        amount=100.0,
        per_hour=None,
        reaches_at=None,
        currency="USD",
        now=NOW,
    )
    assert "not added" not in text(plain)


def test_the_card_never_shows_a_dollar_budget_in_another_currency() -> None:
    resource = ModelResource.model_validate(
        make_model_resource("res-1", "READY", now=NOW.replace(tzinfo=UTC))
    )
    facts = WatchFacts(
        resource=resource,
        price=CostEstimate(currency="EUR", price_per_hour=85.0),
        ready_seconds=3600,
        budget=100.0,
    )
    shown = text({"text": "card", "blocks": watch_blocks(facts)})
    assert "≈ 85.00 EUR" in shown
    assert "100 EUR" not in shown and "100.00 EUR" not in shown
    assert "the $100 budget is in dollars" in shown and "not compared" in shown
    dollars = WatchFacts(
        resource=resource,
        price=CostEstimate(currency="USD", price_per_hour=85.0),
        ready_seconds=3600,
        budget=100.0,
    )
    assert "≈ $85.00 of $100 budget" in text({"text": "c", "blocks": watch_blocks(dollars)})


def test_the_budget_answer_says_when_a_price_is_in_another_currency() -> None:
    assert "not compared" not in budget_set(SID, 100.0, daily=False)
    session = budget_set(SID, 100.0, daily=False, priced_in=["EUR"])
    assert "priced in EUR" in session and "not compared" in session
    daily = budget_set("*", 100.0, daily=True, priced_in=["GBP", "EUR"])
    assert "priced in EUR and GBP" in daily and "not added" in daily
