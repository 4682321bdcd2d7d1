"""What `alerts` answers and what a channel may hold: every rule and budget
listed, in as many sections as they take within Block Kit's limits; a count
that agrees with the list; budgets capped per channel with a clear refusal.
Pure, but for the cap (on a real database)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.rendering.follow import RuleLine, cap_message
from bot.rendering.rules import RuleWords, budget_words, budgets_full, rules_list
from bot.rendering.words import count_words
from bot.store.queries.budgets import MAX_BUDGETS, channel_budgets, set_budget
from bot.store.queries.metric_rules import MAX_METRIC_RULES
from tests.support.blocks import assert_inert, assert_valid
from tests.support.store_rows import CHANNEL, TEAM

Maker = async_sessionmaker[AsyncSession]


def _sid(i: int) -> str:
    return f"{i:08d}-" + "a" * 71  # 80 characters, as long as an id is shown


def _rule(i: int) -> RuleWords:
    return RuleWords(_sid(i), f"m{i:02d}" + "&<>" * 20, ">=", -1.2345e-300, 29 * 86400, True)


def _shown(message: dict[str, object]) -> str:
    blocks = message["blocks"]
    assert isinstance(blocks, list)
    return "\n".join(str(b["text"]["text"]) for b in blocks if b.get("type") == "section")


def test_every_rule_and_budget_is_listed_at_the_caps() -> None:
    rules = [_rule(i) for i in range(MAX_METRIC_RULES)]
    budgets = [budget_words("*", 1_000_000.0, daily=True)] + [
        budget_words(_sid(i), 999_999.99, daily=False) for i in range(MAX_BUDGETS - 1)
    ]
    message = rules_list(rules, budgets)
    assert_valid(message)
    assert_inert(message)
    shown = _shown(message)
    for i in range(MAX_METRIC_RULES):
        assert f"m{i:02d}" in shown, i
    for i in range(MAX_BUDGETS - 1):
        assert f"`{_sid(i)}`" in shown, i
    assert "a day over every session here" in shown
    assert message["text"] == f"{MAX_METRIC_RULES} rules and {MAX_BUDGETS} budgets"


def test_the_count_agrees_with_the_list() -> None:
    one = rules_list(
        [_rule(0)], [budget_words("s1", 5, daily=False), budget_words("*", 9, daily=True)]
    )
    assert one["text"] == "1 rule and 2 budgets"
    assert rules_list([], [])["text"] == "No rules or budgets"
    none = _shown(rules_list([], []))
    assert "No metric rules" in none and "No budgets" in none
    assert rules_list([_rule(0), _rule(1)], [])["text"] == "2 rules and no budgets"
    assert rules_list([], [budget_words("s1", 5, daily=False)])["text"] == "No rules and 1 budget"


@settings(max_examples=30, deadline=None)
@given(rules=st.integers(0, MAX_METRIC_RULES), budgets=st.integers(0, MAX_BUDGETS))
def test_any_number_up_to_the_caps_fits(rules: int, budgets: int) -> None:
    message = rules_list(
        [_rule(i) for i in range(rules)],
        [budget_words(_sid(i), 12.5, daily=False) for i in range(budgets)],
    )
    assert_valid(message)
    shown = _shown(message)
    assert shown.count("\n• ") + shown.startswith("• ") >= rules + budgets


def test_counts_are_worded_in_the_singular_and_the_plural() -> None:
    assert count_words(1, "rule") == "1 rule" and count_words(0, "rule") == "0 rules"
    assert count_words(1_500, "new session") == "1,500 new sessions"
    rule = RuleLine("C1", "all", "", frozenset({"status"}), None, False)
    text = str(cap_message(rule, found=1, subscribed=0, failed=0, waiting=1, cap=50)["text"])
    assert "found 1 new session at once" in text and "1 new sessions" not in text
    assert "the other 1" not in text and "the 1 session left" in text, text
    many = str(cap_message(rule, found=60, subscribed=50, failed=1, waiting=9, cap=50)["text"])
    assert "found 60 new sessions" in many and "the 9 sessions left" in many, many
    assert "1 session could not be subscribed yet" in many and "try it again" in many, many


def test_a_full_channel_is_refused_another_budget_in_words() -> None:
    words = budgets_full(MAX_BUDGETS)
    assert f"already has {MAX_BUDGETS} budgets" in words and "budget &lt;id&gt; off" in words


async def test_a_channel_holds_at_most_the_budget_cap_but_may_change_one_it_has(
    maker: Maker,
) -> None:
    async def put(db: AsyncSession, session_id: str, amount: float, **over: object) -> bool:
        values: dict[str, object] = {
            "team_id": TEAM,
            "channel_id": CHANNEL,
            "session_id": session_id,
            "amount": amount,
            "daily": session_id == "*",
            "created_by": "U1",
        }
        return await set_budget(db, **(values | over))  # type: ignore[arg-type]

    async with maker() as db, db.begin():
        assert await put(db, "*", 100.0)
        for i in range(MAX_BUDGETS - 1):
            assert await put(db, f"s{i}", 10.0)
        assert not await put(db, "one-more", 10.0)
        assert await put(db, "s0", 20.0)  # a budget it holds may change
        assert await put(db, "one-more", 10.0, channel_id="C2")  # another channel's own cap
    async with maker() as db:
        held = await channel_budgets(db, team_id=TEAM, channel_id=CHANNEL)
    assert len(held) == MAX_BUDGETS and "one-more" not in {b.session_id for b in held}
