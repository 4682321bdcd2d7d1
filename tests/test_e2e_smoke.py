"""First end-to-end check: a signed /rl-session against a real process."""

from __future__ import annotations

from tests.fakes import FakeSlack, FakeTogether
from tests.support import BotProcess

SID = "123e4567-e89b-12d3-a456-426614174000"


def test_show_card(bot: BotProcess, slack: FakeSlack, together: FakeTogether) -> None:
    together.add(SID)
    r = bot.command(SID, response_url=slack.response_url("r1"))
    assert r.status_code == 200
    answer = slack.wait_for_response("r1")
    assert answer["response_type"] == "in_channel"
    assert SID in str(answer["blocks"])
