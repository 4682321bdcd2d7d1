"""Slack faults: what delivery and the command path do when Slack says no.

tests/commands/test_subscriptions.py already covers 500s plus a 1 s 429 during delivery
and an archived channel; this file covers the rest: a longer Retry-After, the
`ratelimited` error, `invalid_auth` (loud, kept, told once afterwards),
`channel_not_found` and `thread_not_found` (ended after one attempt), faults on
the command path, and an expired or failing response_url.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.support import BotProcess, query, wait_until
from tests.support.rig import Rig, shared_rig

SID = "123e4567-e89b-12d3-a456-426614174000"


rig = shared_rig()


@pytest.fixture(autouse=True)
def _fresh(rig: Rig) -> Iterator[None]:
    with rig.fresh(tail=80):
        yield


def subscribe(rig: Rig, sid: str, channel: str) -> str:
    token = f"sub-{channel}-{sid}"
    rig.bot.command(
        f"subscribe {sid}", response_url=rig.slack.response_url(token), channel_id=channel
    )
    assert "Subscribed" in json.dumps(rig.slack.wait_for_response(token))
    [root] = [c.ts for c in rig.slack.successful_posts(channel) if c.thread_ts is None]
    assert root is not None
    return root


def told(slack: FakeSlack, channel: str, root: str) -> list[str]:
    return [c.text or "" for c in slack.posts_in_thread(channel, root)]


def failed_posts(slack: FakeSlack, channel: str) -> list[Any]:
    return [c for c in slack.calls_to("chat.postMessage") if c.channel == channel and not c.ok]


def outbox(rig: Rig, channel: str) -> list[tuple[Any, ...]]:
    return rig.query(
        "SELECT state, attempts, last_error, next_attempt_at FROM outbox WHERE channel_id = :c",
        c=channel,
    )


def c_dead(channel: str) -> str:
    return f"{channel}: outbox row dead"


def as_dt(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


# --- delivery ---------------------------------------------------------------------------------


@pytest.mark.backend_independent("Slack's refusals and retries")
def test_delivery_errors_are_handled_per_channel(rig: Rig) -> None:
    slack, together = rig.slack, rig.together
    channels = {
        "CRATE": "ratelimited",
        "CAUTH": "invalid_auth",
        "CGONE": "channel_not_found",
        "CTHREAD": "thread_not_found",
    }
    roots = {}
    for i, channel in enumerate(channels):
        sid = f"session-{i}"
        together.add(sid)
        roots[channel] = (sid, subscribe(rig, sid, channel))
    for channel, error in channels.items():
        slack.set_channel_error(channel, error)
    for sid, _ in roots.values():
        together.set_status(sid, "STOPPING")

    # channel_not_found / thread_not_found: one attempt, the row is dead, the subscription ends.
    for channel in ("CGONE", "CTHREAD"):
        wait_until(
            lambda c=channel: [r[0] for r in outbox(rig, c)] == ["dead"], what=c_dead(channel)
        )
    # `ratelimited`: retried (Retry-After-less, so after about a second each time).
    wait_until(lambda: len(failed_posts(slack, "CRATE")) >= 2, what="ratelimited retried")
    # invalid_auth: logged loudly, the row kept for later.
    wait_until(lambda: "CRITICAL" in rig.bot.log(), what="CRITICAL log line")
    critical = [
        json.loads(line) for line in rig.bot.log().splitlines() if '"level":"CRITICAL"' in line
    ]
    assert any("invalid_auth" in c["msg"] and c.get("channel_id") == "CAUTH" for c in critical)

    slack.clear_channel_error("CRATE")
    wait_until(lambda: told(slack, "CRATE", roots["CRATE"][1]), what="told after ratelimited")
    wait_until(lambda: outbox(rig, "CRATE")[0][0] == "sent", what="CRATE row sent")

    for channel in ("CGONE", "CTHREAD"):
        sid = roots[channel][0]
        [(state, attempts, error, _)] = outbox(rig, channel)
        assert (state, attempts, error) == ("dead", 1, channels[channel])
        assert len(failed_posts(slack, channel)) == 1, channel  # bounded: no retry loop
        assert rig.query(
            "SELECT active, ended_reason FROM subscriptions WHERE session_id = :s", s=sid
        ) == [(False, "slack refused delivery")]

    [(state, attempts, error, next_at)] = outbox(rig, "CAUTH")
    assert (state, attempts, error) == ("pending", 1, "invalid_auth")
    now = datetime.now(UTC).replace(tzinfo=None)
    assert as_dt(next_at) - now > timedelta(seconds=30)  # backs off, does not hammer Slack
    assert len(failed_posts(slack, "CAUTH")) == 1
    assert rig.query("SELECT active FROM subscriptions WHERE channel_id = 'CAUTH'") == [
        (True,)
    ]  # nothing ended, nothing lost

    # The token works again; instead of waiting the minute out, bring the retry forward.
    slack.clear_channel_error("CAUTH")
    rig.query("UPDATE outbox SET next_attempt_at = created_at WHERE channel_id = 'CAUTH'")
    sid, root = roots["CAUTH"]
    wait_until(lambda: told(slack, "CAUTH", root), what="told after invalid_auth")
    wait_until(lambda: outbox(rig, "CAUTH")[0][0] == "sent", what="CAUTH row sent")
    time.sleep(1.5)  # more delivery ticks: nothing told twice
    for channel, (_, root) in roots.items():
        expected = 1 if channel in ("CRATE", "CAUTH") else 0
        posts = told(slack, channel, root)
        assert len(posts) == expected, (channel, posts)
        if expected:
            assert "Running" in posts[0] and "Stopping" in posts[0]


@pytest.mark.backend_independent("Slack's refusals and retries")
def test_a_long_retry_after_is_waited_out_then_told_once(rig: Rig) -> None:
    slack = rig.slack
    rig.together.add(SID)
    root = subscribe(rig, SID, "C123")
    slack.fail_next("chat.postMessage", status=429, retry_after=3)
    rig.together.set_status(SID, "STOPPING")
    wait_until(lambda: told(slack, "C123", root), timeout=20, what="told after Retry-After")
    [refused] = failed_posts(slack, "C123")
    [posted] = slack.posts_in_thread("C123", root)
    assert refused.status == 429
    assert posted.at - refused.at >= 2.9, posted.at - refused.at  # not before Slack allowed
    time.sleep(1.0)
    assert len(told(slack, "C123", root)) == 1
    assert [r[:2] for r in outbox(rig, "C123")] == [("sent", 2)]


@pytest.mark.backend_independent("Slack's refusals and retries")
def test_a_slack_incident_told_with_http_200_is_outlasted_like_a_503(rig: Rig) -> None:
    """Slack answers `ok: false` with `internal_error`, `fatal_error`,
    `service_unavailable` and `request_timeout` for longer than an unknown
    refusal's few tries; the status change is told once when Slack is back. The
    back-off is brought forward in the database so the test does not wait it out."""
    slack = rig.slack
    rig.together.add(SID)
    root = subscribe(rig, SID, "C200")
    errors = ["internal_error", "fatal_error", "service_unavailable", "request_timeout"] * 2
    for error in errors:
        slack.fail_next("chat.postMessage", error=error)
    rig.together.set_status(SID, "STOPPING")

    def retried_at_once() -> bool:
        rig.query(
            "UPDATE outbox SET next_attempt_at = created_at"
            " WHERE channel_id = 'C200' AND state = 'pending'"
        )
        rows = outbox(rig, "C200")
        return bool(rows) and rows[0][0] in ("sent", "dead")

    wait_until(retried_at_once, timeout=60, what="told or set aside")
    assert [c.error for c in failed_posts(slack, "C200")] == errors
    [(state, attempts, _, _)] = outbox(rig, "C200")
    assert (state, attempts) == ("sent", len(errors) + 1)
    time.sleep(1.0)
    [posted] = told(slack, "C200", root)
    assert "Stopping" in posted


# --- the command path ---------------------------------------------------------------------------


@pytest.mark.backend_independent("Slack's refusals and retries")
def test_slack_500_and_429_while_subscribing_are_retried(rig: Rig) -> None:
    slack = rig.slack
    rig.together.add(SID)
    rig.together.add("second-1")
    slack.fail_next("chat.postMessage", status=500)
    root = subscribe(rig, SID, "C1")
    slack.fail_next("chat.postMessage", status=429, retry_after=1)
    subscribe(rig, "second-1", "C2")
    assert [c.status for c in slack.calls_to("chat.postMessage")] == [500, 200, 429, 200]
    assert len(slack.successful_posts("C1")) == 1 and len(slack.successful_posts("C2")) == 1
    assert rig.query("SELECT channel_id, root_ts FROM subscriptions WHERE channel_id = 'C1'") == [
        ("C1", root)
    ]


@pytest.mark.backend_independent("Slack's refusals and retries")
def test_an_expired_response_url_falls_back_to_the_web_api(rig: Rig) -> None:
    slack = rig.slack
    rig.together.add(SID)

    # The card was meant for the channel: it is posted there.
    slack.expire_response_url("card")
    rig.bot.command(SID, response_url=slack.response_url("card"))
    [card] = slack.wait_for_calls("chat.postMessage")
    assert card.channel == "C123" and card.thread_ts is None
    assert SID in json.dumps(card.blocks)
    assert [a.status for a in slack.response_attempts] == [404]

    # An error was meant for the user alone: ephemeral, to that user.
    slack.expire_response_url("missing")
    rig.bot.command("nope-404", response_url=slack.response_url("missing"), user_id="U777")
    [eph] = slack.wait_for_calls("chat.postEphemeral")
    assert (eph.channel, eph.params.get("user")) == ("C123", "U777")
    assert "No session named `nope-404`" in (eph.text or "")

    # A response_url that errors (500) is treated the same way.
    slack.fail_next("response", status=500)
    rig.bot.command(f"subscribe {SID}", response_url=slack.response_url("broken"))
    ephemerals = slack.wait_for_calls("chat.postEphemeral", 2)
    assert "Subscribed" in (ephemerals[1].text or "")
    assert rig.query("SELECT count(*) FROM subscriptions WHERE active") == [(1,)]

    # A click whose response_url expired is still answered.
    slack.expire_response_url("click")
    rig.bot.click("rl_refresh", SID, response_url=slack.response_url("click"))
    ephemerals = slack.wait_for_calls("chat.postEphemeral", 3)
    assert SID in json.dumps(ephemerals[2].blocks)
    assert slack.responses == {}  # nothing ever reached an expired or failing URL


def test_a_rate_limited_root_update_is_retried_without_repeating_the_reply(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    """chat.update is limited more tightly than chat.postMessage; a 429 on it must
    not leave the root card stale, nor tell the change twice."""
    sid = "123e4567-e89b-12d3-a456-4266141740aa"
    together.add(sid)
    bot.command(f"subscribe {sid}", response_url=slack.response_url("rl-sub"))
    assert "Subscribed" in str(slack.wait_for_response("rl-sub"))
    [root] = [c.ts for c in slack.successful_posts("C123") if c.thread_ts is None]
    slack.fail_next("chat.update", status=429, retry_after=1)
    together.set_status(sid, "STOPPING")
    wait_until(
        lambda: any("Stopping" in str(u.blocks) for u in slack.updates("C123", root) if u.ok),
        timeout=20,
        what="the root updated after the 429",
    )
    replies = [c for c in slack.successful_posts("C123") if c.thread_ts == root]
    assert len(replies) == 1
    updates = [c for c in slack.calls_to("chat.update") if c.params.get("ts") == root]
    assert [u.ok for u in updates] == [False, True]  # refused once, then done
    # The row is marked just after the update Slack accepted: wait for that write.
    wait_until(
        lambda: query(db_url, "SELECT state, attempts FROM outbox") == [("sent", 2)],
        what="the row marked sent on its second attempt",
    )


@pytest.mark.parametrize("check", ["missing_scope", "ratelimited"])
def test_a_failing_root_update_never_repeats_the_reply_whatever_the_thread_check_says(
    rig: Rig, check: str
) -> None:
    """chat.update answers 429, 429, 500, 500 while the thread cannot be read (no
    history scope, which is optional, or conversations.replies rate limited):
    the reply is told once, and only the root card is retried until it shows it."""
    slack = rig.slack
    rig.together.add(SID)
    root = subscribe(rig, SID, "C123")
    if check == "missing_scope":
        slack.fail_next("conversations.replies", error="missing_scope", times=1000)
    else:
        slack.fail_next("conversations.replies", status=429, retry_after=1, times=1000)
    on_root = lambda p: p.get("ts") == root  # noqa: E731
    slack.fail_next("chat.update", status=429, retry_after=1, times=2, when=on_root)
    slack.fail_next("chat.update", status=500, times=2, when=on_root)
    rig.together.set_status(SID, "STOPPING")
    wait_until(
        lambda: any("Stopping" in json.dumps(u.blocks) for u in slack.updates("C123", root)),
        timeout=40,
        what="the root card updated after four refusals",
    )
    assert [c.status for c in slack.calls_to("chat.update") if on_root(c.params)] == [
        429,
        429,
        500,
        500,
        200,
    ]
    wait_until(lambda: outbox(rig, "C123")[0][0] == "sent", what="the row marked sent")
    time.sleep(1.5)  # more delivery ticks: nothing told twice
    [reply] = told(slack, "C123", root)
    assert "Running" in reply and "Stopping" in reply
    # The post is stored the moment Slack takes it: no retry looks for it again.
    assert slack.calls_to("conversations.replies") == []
    [(state, _, error, _)] = outbox(rig, "C123")
    assert (state, error) == ("sent", None)


def test_a_refusal_the_database_cannot_store_is_still_recorded(rig: Rig) -> None:
    """Slack's error text is stored with the row; a NUL in it (PostgreSQL refuses
    one) must not leave the result unrecorded, the row to its lease, and the
    channel waiting."""
    slack = rig.slack
    rig.together.add(SID)
    root = subscribe(rig, SID, "C123")
    slack.fail_next(
        "chat.postMessage",
        error="odd\u0000refusal",
        times=2,
        when=lambda p: p.get("thread_ts") == root,
    )
    rig.together.set_status(SID, "STOPPING")
    wait_until(lambda: [r[0] for r in outbox(rig, "C123")] == ["sent"], what="the row sent")
    assert len(told(slack, "C123", root)) == 1
    assert len(failed_posts(slack, "C123")) == 2
    assert "could not record a delivery result" not in rig.bot.log()
