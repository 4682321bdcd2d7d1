"""The usage words: mrkdwn Slack shows as written, whatever verb they explain."""

from __future__ import annotations

import re

import pytest

from bot.rendering import usage

USAGES = {name: getattr(usage, name) for name in dir(usage) if "_USAGE" in name}


@pytest.mark.parametrize("name", sorted(USAGES))
def test_usage_words_hold_no_bracket_slack_would_read_as_a_link_or_mention(name: str) -> None:
    text = USAGES[name]
    assert "<" not in text and ">" not in text, text
    # every `&` starts an entity Slack knows, or is plain W&B
    assert all(m in ("&lt;", "&gt;", "&B") for m in re.findall(r"&(?:lt;|gt;|\w)", text)), text
    assert text.count("`") % 2 == 0, text  # code spans closed
