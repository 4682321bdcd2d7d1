"""The root card's thread line: until when the thread is muted and the channel's
metric rules on the session, what `mute` and `alert` change on the card."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.rendering.card import card
from bot.rendering.root_card import CardExtras, card_with_extras, thread_line
from bot.simulated.slack_charts import blocks_problems
from bot.training.poll_progress import CardView
from bot.training.sessions import TrainingSession

NOW = datetime(2026, 12, 7, 14, 0, tzinfo=UTC)
SESSION = TrainingSession.model_validate({"id": "sess-0123456789", "status": "RUNNING"})


def test_a_muted_thread_and_its_rules_show_above_the_buttons() -> None:
    extras = CardExtras(
        CardView(),
        muted_until=datetime(2026, 12, 7, 14, 30),
        rules=("`kl > 8`", "`reward < 0.2` for 10 min, pages on-call"),
    )
    drawn = card_with_extras(card(SESSION, subscribed=True), extras, now=NOW)
    kinds = [b["type"] for b in drawn["blocks"]]
    line = drawn["blocks"][kinds.index("actions") - 1]
    assert line["type"] == "context"
    text = line["elements"][0]["text"]
    assert text.startswith(":no_bell: Muted until 14:30 UTC · :bell: Alerts: `kl > 8`")
    assert blocks_problems(drawn["blocks"]) == []


def test_the_line_names_another_day_counts_many_rules_and_goes_when_unmuted() -> None:
    tomorrow = CardExtras(CardView(), muted_until=datetime(2026, 12, 8, 9, 5))
    assert thread_line(tomorrow, now=NOW) == ":no_bell: Muted until Dec 8, 09:05 UTC"
    many = CardExtras(CardView(), rules=tuple(f"`m{i} > 1`" for i in range(5)))
    assert thread_line(many, now=NOW) == ":bell: Alerts: `m0 > 1`, `m1 > 1`, `m2 > 1` and 2 more"
    over = CardExtras(CardView(), muted_until=NOW.replace(tzinfo=None) - timedelta(minutes=1))
    assert thread_line(over, now=NOW) is None
    plain = card(SESSION, subscribed=True)
    assert (
        card_with_extras(plain, CardExtras(CardView()), now=NOW)["blocks"][-1]
        == plain["blocks"][-1]
    )
