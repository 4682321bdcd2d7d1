"""Outbox retention, and two replicas racing to subscribe the same channel."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest

from tests.fakes import FakeSlack, FakeTogether
from tests.support import BotFactory, query, wait_until

SID = "123e4567-e89b-12d3-a456-426614174000"


def test_finished_outbox_rows_past_retention_are_pruned_pending_ones_kept(
    start_bot: BotFactory, db_url: str
) -> None:
    rows = [
        ("old-sent", "sent", datetime(2000, 1, 1)),
        ("old-pending", "pending", datetime(2000, 1, 1)),
        ("new-sent", "sent", datetime(2999, 1, 1)),
    ]
    for key, state, created in rows:
        query(
            db_url,
            "INSERT INTO outbox (dedupe_key, kind, channel_id, payload, state, attempts, "
            "next_attempt_at, created_at) VALUES (:k, 'operator', 'CNOWHERE', '{}', :s, 0, "
            ":later, :c)",
            k=key,
            s=state,
            c=created,
            later=datetime(2999, 1, 1),
        )
    bot = start_bot()  # the prune job runs at start, then hourly
    wait_until(
        lambda: (
            query(db_url, "SELECT dedupe_key FROM outbox ORDER BY dedupe_key")
            == [("new-sent",), ("old-pending",)]
        ),
        what="old finished row pruned",
    )
    assert "pruned 1 finished outbox rows" in bot.log()


def test_two_replicas_subscribing_at_once_leave_one_subscription_and_one_root(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    if db_url.startswith("sqlite"):
        pytest.skip("replicas share a PostgreSQL database")
    a, b = start_bot(REPLICA_ID="a"), start_bot(REPLICA_ID="b")
    together.add(SID)
    # Both look for an existing subscription before either has stored one: the
    # root post (slow here) sits between that look-up and the insert.
    slack.method_latency["chat.postMessage"] = 1.0
    threads = [
        threading.Thread(
            target=bot.command,
            args=(f"subscribe {SID}",),
            kwargs={"response_url": slack.response_url(f"race-{i}")},
        )
        for i, bot in enumerate((a, b))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    answers = [str(slack.wait_for_response(f"race-{i}")) for i in range(2)]
    assert query(db_url, "SELECT count(*) FROM subscriptions") == [(1,)]
    [(root,)] = query(db_url, "SELECT root_ts FROM subscriptions")
    posted = {c.ts for c in slack.successful_posts("C123") if c.thread_ts is None}
    deleted = {c.params.get("ts") for c in slack.successful("chat.delete")}
    assert posted - deleted == {root}
    assert len(posted) == 2 and len(deleted) == 1  # the race really happened
    assert sum("Subscribed" in x for x in answers) == 1
    assert sum("a moment ago" in x or "already subscribed" in x for x in answers) == 1
