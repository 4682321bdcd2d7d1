"""No idle waits between the steps, in a real process: a change a poll writes is
sent at once (the delivery loop is rung, not left to its tick), and a session a
command has just fetched is written as its poll (the change it saw is told at
once, and the poller does not ask again). Taking over a killed replica is in
test_crash_and_replicas.py; the in-process rules in tests/poll/test_leases_liveness.py."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.fakes import FakeSlack, FakeTogether
from tests.support import BotFactory, wait_until
from tests.support.threads import notifications, subscribe

SID = "123e4567-e89b-12d3-a456-426614174000"


@pytest.mark.slow
def test_a_change_is_sent_as_soon_as_it_is_written_and_a_commands_fetch_is_the_poll(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    # Delivery's own tick is a minute away, and after its first poll the session's next
    # poll is too (a budget of one request a minute): only a ring or the command can tell.
    bot = start_bot(
        DELIVERY_INTERVAL_SECONDS="60",
        POLL_MIN_INTERVAL_SECONDS="2",
        POLL_INTERVAL_SECONDS="60",
        TOGETHER_REQUESTS_PER_MINUTE="1",
    )
    together.add(SID, "TRAINING_SESSION_STATUS_CREATING")
    root = subscribe(bot, slack, "C1")

    # 1. the first poll (2 s after subscribing) sees RUNNING and rings delivery
    changed = time.monotonic()
    together.set_status(SID, "RUNNING")
    wait_until(lambda: notifications(slack, "C1", root), timeout=15, what="told by the poll")
    assert time.monotonic() - changed < 10
    assert together.requests_for(SID) == 2  # the subscribe's GET and the poll's

    # 2. a person asks for the card: the change it shows is told now, not at the next poll
    together.set_status(SID, "STOPPING")
    token = f"card-{uuid.uuid4().hex[:6]}"
    changed = time.monotonic()
    bot.command(SID, response_url=slack.response_url(token), channel_id="C1")
    assert "STOPPING" in str(slack.wait_for_response(token)).upper()
    wait_until(
        lambda: len(notifications(slack, "C1", root)) == 2, timeout=10, what="told by the card"
    )
    assert time.monotonic() - changed < 5
    assert together.requests_for(SID) == 3  # no poll of its own: the card was the poll
    assert "STOPPING" in str(notifications(slack, "C1", root)[-1].blocks).upper()
