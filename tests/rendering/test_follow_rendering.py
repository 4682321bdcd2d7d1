"""Follow rules and the personal switch in words: within Block Kit's limits,
user text inert, the switch's button saying what it will do."""

from __future__ import annotations

import json

from bot import rendering
from bot.rendering.follow import (
    RuleLine,
    cap_message,
    home_blocks,
    personal_heading,
    rule_words,
    switched_off_message,
    with_rules,
)
from tests.block_kit import block_kit_problems


def rule(n: int = 0, **over: object) -> RuleLine:
    values: dict[str, object] = {
        "channel_id": "C1",
        "selector": "U2",
        "model": f"<!channel> m{n}",
        "filters": frozenset({"errors-only"}),
        "stall_minutes": 30,
        "existing": True,
    }
    values.update(over)
    return RuleLine(**values)  # type: ignore[arg-type]


def test_a_rule_reads_as_the_command_that_makes_it_with_user_text_inert() -> None:
    words = rule_words(rule())
    assert words.startswith("follow <@U2> model=`")
    assert "errors-only" in words and "stall=30m" in words and words.endswith("existing")
    assert "<!channel>" not in words
    assert "stall off" in rule_words(rule(stall_minutes=0, selector="all"))


def test_list_and_home_stay_within_block_kit_with_twenty_rules() -> None:
    rules = [rule(n) for n in range(20)]
    listed = with_rules(rendering.subscription_list([]), rules)
    assert block_kit_problems(listed) == []
    assert "Follow rules in this channel (20)" in json.dumps(listed)
    off = rule(99, active=False, ended_reason="the channel is archived.")
    for on, mapped in ((True, True), (False, True), (False, False)):
        blocks = home_blocks([*rules, off], switch_on=on, mapped=mapped)
        view = {"text": "home", "blocks": blocks}
        assert block_kit_problems(view) == []  # type: ignore[arg-type]
        text = json.dumps(blocks)
        assert ("Turn off" in text) is on and ("Turn on" in text) is (mapped and not on)
        assert ("ask your operator to pair your Together user id" in text) is not mapped
        assert "CREATED_BY_USER_MAP" not in text  # the operator's word, not the person's
        assert "switched off: the channel is archived." in text


def test_discovery_messages_and_the_dm_heading() -> None:
    for message in (
        cap_message(rule(), found=55, subscribed=50, failed=0, waiting=5, cap=50),
        switched_off_message(rule(), reason="I was removed from the channel."),
        personal_heading(rendering.notice("errored"), name="<@U1> run"),
    ):
        assert block_kit_problems(message) == []
    assert (
        "found 55 new sessions"
        in cap_message(rule(), found=55, subscribed=50, failed=0, waiting=5, cap=50)["text"]
    )
    heading = json.dumps(personal_heading(rendering.notice("x"), name="<!here>"))
    assert "<!here>" not in heading and "Your session" in heading
