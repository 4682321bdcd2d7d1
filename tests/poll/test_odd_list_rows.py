"""In the real process: a listed session whose free-form `metadata` no JSON
reader takes (arrays nested 1,000 deep, an integer of 5,000 digits). The page
is read row by row: every other session is still learned from it and told, the
odd rows are skipped and named in the log, and `ls` still lists the rest."""

from __future__ import annotations

import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.support import BotFactory, BotProcess, wait_until

FIRST = "a0000000-0000-0000-0000-000000000001"
DEEP = "d0000000-0000-0000-0000-000000000003"
DIGITS = "e0000000-0000-0000-0000-000000000004"
SECOND = "f0000000-0000-0000-0000-000000000002"


def _subscribe(bot: BotProcess, slack: FakeSlack, sid: str, channel: str) -> str:
    token = f"sub-{sid}"
    bot.command(f"subscribe {sid}", response_url=slack.response_url(token), channel_id=channel)
    assert "Subscribed" in str(slack.wait_for_response(token))
    return next(c.ts for c in slack.successful_posts(channel) if c.thread_ts is None and c.ts)


def _thread(slack: FakeSlack, channel: str, root: str) -> list[str]:
    return [c.text or "" for c in slack.successful_posts(channel) if c.thread_ts == root]


@pytest.mark.backend_independent("Together's rows, read per row")
def test_a_listed_row_no_json_reader_takes_is_skipped_and_named_and_the_rest_told(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    together.add(FIRST, display_name="first-run")
    together.add(DEEP, metadata=together.raw_json("[" * 1000 + "]" * 1000))
    together.add(DIGITS, metadata={"wandb": {"run_id": together.raw_json("7" * 5000)}})
    together.add(SECOND, display_name="second-run")
    bot = start_bot(POLL_PLAN="list")
    first = _subscribe(bot, slack, FIRST, "C1")
    second = _subscribe(bot, slack, SECOND, "C2")

    gets = together.requests_for(FIRST) + together.requests_for(SECOND)
    together.set_status(FIRST, "STOPPING")  # both still live: learned from the page
    together.set_status(SECOND, "STOPPING")
    wait_until(
        lambda: _thread(slack, "C1", first) and _thread(slack, "C2", second),
        timeout=20,
        what="both changes told",
    )
    assert "Stopping" in _thread(slack, "C1", first)[0]
    assert together.requests_for(FIRST) + together.requests_for(SECOND) == gets  # no GETs
    log = bot.log()
    for odd in (DEEP, DIGITS):
        assert f"skipping a listed row that cannot be read (id '{odd}')" in log

    bot.command("ls all", response_url=slack.response_url("ls"), channel_id="C1")
    listed = str(slack.wait_for_response("ls"))
    assert "first-run" in listed and "second-run" in listed
