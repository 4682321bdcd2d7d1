"""Outbox retention, and two replicas racing to subscribe the same channel."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest

from bot.simulated import FakeSlack, FakeTogether
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
    for outbox_id, acked in ((1, datetime(2000, 1, 1)), (2, datetime(2999, 1, 1))):
        query(
            db_url,
            "INSERT INTO alert_acks (outbox_id, channel_id, user_id, acked_at) "
            "VALUES (:i, 'COPS', 'UDANA', :a)",
            i=outbox_id,
            a=acked,
        )
    bot = start_bot()  # the prune job runs at start, then hourly
    wait_until(
        lambda: (
            query(db_url, "SELECT dedupe_key FROM outbox ORDER BY dedupe_key")
            == [("new-sent",), ("old-pending",)]
        ),
        what="old finished row pruned",
    )
    # the log line follows the commit the query above saw: wait for it, do not race it
    wait_until(lambda: "pruned 1 finished outbox rows" in bot.log(), what="the prune logged")
    # an acknowledgement goes with the age of its alert
    assert query(db_url, "SELECT outbox_id FROM alert_acks") == [(2,)]


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


OLD, RECENT = datetime(2000, 1, 1), datetime(2999, 1, 1)


def test_ended_subscriptions_and_unwatched_sessions_past_retention_are_deleted(
    start_bot: BotFactory, db_url: str
) -> None:
    """WATCH_RETENTION_DAYS: a subscription that ended long ago goes with its sent
    messages, unless one is still pending; a watch inactive as long goes once no
    subscription names it. Active ones, and ones that ended recently, stay."""
    subs = [  # (id, session, active, ended_at)
        (1, "s-old", False, OLD),
        (2, "s-pending", False, OLD),
        (3, "s-recent", False, RECENT),
        (4, "s-active", True, None),
    ]
    for sub_id, session, active, ended in subs:
        query(
            db_url,
            "INSERT INTO subscriptions (id, team_id, channel_id, session_id, root_ts, "
            "subscribed_by, created_at, active, ended_at, filters) VALUES (:id, 'T1', "
            "'CNOWHERE', :s, '1.0', 'U1', :old, :a, :e, 'status')",
            id=sub_id,
            s=session,
            a=active,
            e=ended,
            old=OLD,
        )
    watches = [  # (session, active, updated_at)
        ("s-old", False, OLD),
        ("s-pending", False, OLD),
        ("s-recent", False, OLD),
        ("s-active", True, OLD),
        ("s-lonely", False, OLD),
        ("s-fresh", False, RECENT),
    ]
    for session, active, updated in watches:
        query(
            db_url,
            "INSERT INTO watched_sessions (session_id, active, last_status, snapshot, "
            "transition_seq, next_poll_at, consecutive_failures, write_failures, updated_at) "
            "VALUES (:s, :a, 'TRAINING_SESSION_STATUS_STOPPED', '{}', 0, :later, 0, 0, :u)",
            s=session,
            a=active,
            u=updated,
            later=RECENT,
        )
    for key, sub_id, state in [
        ("sent-1", 1, "sent"),
        ("sent-2", 2, "sent"),
        ("due-2", 2, "pending"),
    ]:
        query(
            db_url,
            "INSERT INTO outbox (dedupe_key, kind, subscription_id, channel_id, payload, state, "
            "attempts, next_attempt_at, created_at) VALUES (:k, 'operator', :sub, 'CNOWHERE', "
            "'{}', :st, 0, :later, :later)",
            k=key,
            sub=sub_id,
            st=state,
            later=RECENT,
        )
    bot = start_bot()  # the prune job runs at start, then hourly
    wait_until(
        lambda: query(db_url, "SELECT id FROM subscriptions ORDER BY id") == [(2,), (3,), (4,)],
        what="the long-ended subscription deleted",
    )
    wait_until(
        lambda: (
            query(db_url, "SELECT session_id FROM watched_sessions ORDER BY session_id")
            == [("s-active",), ("s-fresh",), ("s-pending",), ("s-recent",)]
        ),
        what="the unwatched sessions deleted",
    )
    assert query(db_url, "SELECT dedupe_key FROM outbox ORDER BY dedupe_key") == [
        ("due-2",),
        ("sent-2",),
    ]
    assert "pruned 1 ended subscriptions and 2 watches" in bot.log()
