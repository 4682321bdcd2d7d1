"""Spend watch: a READY model resource whose last session stopped is
alerted once (on-call, and the thread of the session's subscription), by the
org-wide WATCH_IDLE_RESOURCES and, without it, by the check of subscribed
sessions' resources, through a real `rl-bot serve`; its Stop resource button is
refused for a user not allowed and sent once for one who is."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.support import BotFactory, query, wait_until

SID = "7c3e4567-e89b-12d3-a456-426614174000"
SID_BUSY = "8d3e4567-e89b-12d3-a456-426614174000"
SID_OTHER = "9e3e4567-e89b-12d3-a456-426614174000"
OPS = "COPS"
FAST = {
    "WATCH_IDLE_RESOURCES": "true",
    "IDLE_RESOURCE_ALERT_MINUTES": "0.05",  # 3 s instead of 20 min
    "ONCALL_CHANNEL": OPS,
    "STOP_ALLOWED_USER_IDS": "U123",
    # these tests' watches run every second: a budget their reads fit in (the idle
    # tier's floor of the default budget, 12 a minute, is tests/process/test_one_budget.py's)
    "TOGETHER_REQUESTS_PER_MINUTE": "1200",
}


def idle_posts(slack: FakeSlack, channel: str) -> list[Any]:
    return [c for c in slack.successful_posts(channel) if "idle for" in (c.text or "")]


def resource_lists(together: FakeTogether) -> list[str]:
    """The resource ids Together's session list was asked about, in order."""
    return [
        q["model_resources_id"][0]
        for p in together.paths
        if urlsplit(p).path.endswith("/rl/training-sessions")
        and "model_resources_id" in (q := parse_qs(urlsplit(p).query))
    ]


def stop_button(post: Any) -> dict[str, Any]:
    return next(
        e
        for b in post.blocks or []
        if b.get("type") == "actions"
        for e in b["elements"]
        if e["action_id"] == "rl_stop_resource"
    )


def test_an_idle_resource_is_alerted_once_and_stopped_only_by_an_allowed_user(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    together.add_resource("res-idle", "READY")
    together.add_resource("res-busy", "READY")
    together.add(SID, "RUNNING", model_resources_id="res-idle")
    together.add(SID_BUSY, "RUNNING", model_resources_id="res-busy")
    bot = start_bot(**FAST)
    token = "sub"
    bot.command(f"subscribe {SID}", response_url=slack.response_url(token))
    assert "Subscribed" in json.dumps(slack.wait_for_response(token))
    root = next(c.ts for c in slack.successful_posts("C123") if c.thread_ts is None)
    time.sleep(4)
    assert idle_posts(slack, OPS) == []  # a RUNNING session keeps it busy

    together.set_status(SID, "STOPPED")  # the session stops; its resource keeps billing
    wait_until(lambda: idle_posts(slack, OPS), what="idle alert", timeout=20)
    wait_until(lambda: idle_posts(slack, "C123"), what="idle alert in the thread")
    time.sleep(3)  # several more runs of the watch
    [page] = idle_posts(slack, OPS)
    [told] = idle_posts(slack, "C123")
    assert told.thread_ts == root
    text = (page.text or "") + json.dumps(page.blocks)
    assert "res-idle" in text and "$25.00/h" in text  # H100 trainer + 1 replica in the fake
    assert "res-busy" not in json.dumps([p.blocks for p in slack.successful_posts(OPS)])
    button = stop_button(page)
    assert button["value"] == "res-idle" and "confirm" in button

    bot.click(
        "rl_stop_resource",
        "res-idle",
        response_url=slack.response_url("no"),
        user_id="U999",
        channel_id=OPS,
        message_ts=page.ts,
        is_ephemeral=False,
    )
    assert "not allowed" in json.dumps(slack.wait_for_response("no"))
    assert together.resource_stop_requests == []
    for i, bad in enumerate(["../x", ""]):
        bot.click("rl_stop_resource", bad, response_url=slack.response_url(f"bad{i}"))
        assert "not a model resource id" in json.dumps(slack.wait_for_response(f"bad{i}"))
    bot.click(
        "rl_stop_resource",
        "res-idle",
        response_url=slack.response_url("yes"),
        channel_id=OPS,
        message_ts=page.ts,
        is_ephemeral=False,
    )
    answer = json.dumps(slack.wait_for_response("yes"))
    assert "asked Together to stop model resource" in answer and "Stopping" in answer
    assert together.resource_stop_requests == [("res-idle", False)]
    said = [c for c in slack.successful_posts(OPS) if c.thread_ts == page.ts]
    assert len(said) == 1 and "<@U123>" in (said[0].text or "")
    assert any(
        "model resource stop requested" in line and "U123" in line
        for line in bot.log().splitlines()
    )


@pytest.mark.backend_independent("Together's answers")
def test_a_resource_with_an_active_session_is_not_stopped(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    together.add_resource("res-busy", "READY")
    together.add(SID_BUSY, "RUNNING", model_resources_id="res-busy")
    bot = start_bot(**FAST)
    bot.click("rl_stop_resource", "res-busy", response_url=slack.response_url("busy"))
    answer = json.dumps(slack.wait_for_response("busy"))
    assert "still active" in answer
    assert together.resource_stop_requests == []


@pytest.mark.parametrize("spend_watch", ["true", "false"])
@pytest.mark.backend_independent("which watch reads a resource")
def test_a_subscribed_sessions_idle_resource_is_alerted_without_the_org_wide_watch(
    spend_watch: str, start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    """WATCH_IDLE_RESOURCES off: the resource a subscribed session leaves READY is
    alerted once in its thread and on-call, with the Stop resource button; one
    still used by another (unwatched) session is not, and is then left alone."""
    shared = "res-shared"
    together.add_resource("res-idle", "READY")
    together.add_resource(shared, "READY")
    together.add(SID, "RUNNING", model_resources_id="res-idle")
    together.add(SID_BUSY, "RUNNING", model_resources_id=shared)
    together.add(SID_OTHER, "RUNNING", model_resources_id=shared)  # nobody subscribed
    env = FAST | {"WATCH_IDLE_RESOURCES": "false", "SPEND_WATCH": spend_watch}
    bot = start_bot(**env)
    roots = {}
    for sid, channel in ((SID, "C123"), (SID_BUSY, "C456")):
        token = f"sub-{channel}"
        bot.command(f"subscribe {sid}", response_url=slack.response_url(token), channel_id=channel)
        assert "Subscribed" in json.dumps(slack.wait_for_response(token))
        roots[channel] = next(c.ts for c in slack.successful_posts(channel) if c.thread_ts is None)
    time.sleep(4)
    assert idle_posts(slack, OPS) == [] and idle_posts(slack, "C123") == []
    assert resource_lists(together) == []  # nothing looks idle while its sessions run

    together.set_status(SID, "STOPPED")  # its resource keeps billing
    together.set_status(SID_BUSY, "STOPPED")  # its resource still runs SID_OTHER
    wait_until(lambda: idle_posts(slack, "C123"), what="idle alert in the thread", timeout=30)
    wait_until(lambda: idle_posts(slack, OPS), what="idle alert on-call")
    time.sleep(4)  # several more runs of the check
    [told] = idle_posts(slack, "C123")
    [page] = idle_posts(slack, OPS)
    assert told.thread_ts == roots["C123"]
    text = (told.text or "") + json.dumps(told.blocks)
    assert "res-idle" in text and "$25.00/h" in text
    assert stop_button(told)["value"] == "res-idle" and "confirm" in stop_button(told)
    assert "res-idle" in (page.text or "")
    assert idle_posts(slack, "C456") == []
    assert "res-shared" not in json.dumps([p.blocks for p in slack.successful_posts(OPS)])
    # Each resource's sessions were listed by its id, and the check is over:
    # alerted, or taken by another session; nothing is asked any more.
    listed = resource_lists(together)
    assert {"res-idle", shared} <= set(listed)
    time.sleep(3)
    assert resource_lists(together) == listed
    # the org-wide list of READY resources is not used (the spend watch may list
    # the live ones, PENDING/CREATING/READY, to read its resources)
    assert not [
        p
        for p in together.paths
        if urlsplit(p).path.endswith("/rl/model-resources")
        and parse_qs(urlsplit(p).query).get("status[]") == ["MODEL_RESOURCES_STATUS_READY"]
    ]
    # A restart neither alerts again nor asks again: the check's state is stored.
    bot.stop()
    bot = start_bot(**env)
    time.sleep(4)
    assert len(idle_posts(slack, "C123")) == 1 and len(idle_posts(slack, OPS)) == 1
    assert resource_lists(together) == listed

    bot.click(
        "rl_stop_resource",
        "res-idle",
        response_url=slack.response_url("yes"),
        message_ts=told.ts,
        is_ephemeral=False,
    )
    assert "asked Together to stop model resource" in json.dumps(slack.wait_for_response("yes"))
    assert together.resource_stop_requests == [("res-idle", False)]


def answered_reads(together: FakeTogether, resource_id: str) -> list[int]:
    """The statuses of the answered GETs of one model resource, in order."""
    return [
        r.status
        for r in list(together.requests)
        if r.route == "resource" and r.session_id == resource_id and r.status
    ]


FOLLOW_UP_ONLY = FAST | {"WATCH_IDLE_RESOURCES": "false"}


@pytest.mark.parametrize("queued", ["PENDING", "CREATING"])
def test_a_resource_still_queued_when_its_session_stopped_is_alerted_once_ready(
    queued: str, start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    """A session stopped while its resource waits for GPUs: the check keeps
    looking (PENDING and CREATING end nothing) and tells the resource idle once it
    turned READY and sat there."""
    together.add_resource("res-queued", queued)
    together.add(SID, "CREATING", model_resources_id="res-queued")
    bot = start_bot(**FOLLOW_UP_ONLY)
    bot.command(f"subscribe {SID}", response_url=slack.response_url("sub"))
    assert "Subscribed" in json.dumps(slack.wait_for_response("sub"))
    together.set_status(SID, "STOPPED")
    # The check read the resource while it was still queued ...
    wait_until(lambda: answered_reads(together, "res-queued"), what="a look at the resource")
    together.set_resource("res-queued", "READY")  # ... and it turns READY afterwards
    wait_until(lambda: idle_posts(slack, "C123"), what="idle alert in the thread", timeout=20)
    assert "res-queued" in (idle_posts(slack, "C123")[0].text or "")


@pytest.mark.backend_independent("Together's dates, read per resource")
def test_one_resources_impossible_date_silences_no_other_resources_alert(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    """Resource A says it changed at the end of year 9999 (`since + threshold` is
    past what a date can hold); resource B is simply idle. A's bad date keeps A
    from being alerted and nothing else: B's alert is written."""
    together.add_resource("res-a-future", "READY", updated_at="9999-12-31T23:59:59Z")
    together.add_resource("res-b-idle", "READY")
    together.add(SID, "RUNNING", model_resources_id="res-a-future")
    together.add(SID_BUSY, "RUNNING", model_resources_id="res-b-idle")
    bot = start_bot(**FOLLOW_UP_ONLY)
    for sid, channel in ((SID, "C123"), (SID_BUSY, "C456")):
        token = f"sub-{channel}"
        bot.command(f"subscribe {sid}", response_url=slack.response_url(token), channel_id=channel)
        assert "Subscribed" in json.dumps(slack.wait_for_response(token))
    together.set_status(SID, "STOPPED")
    together.set_status(SID_BUSY, "STOPPED")
    wait_until(lambda: idle_posts(slack, "C456"), what="B's idle alert", timeout=20)
    assert "res-b-idle" in (idle_posts(slack, "C456")[0].text or "")
    assert idle_posts(slack, "C123") == []
    assert "Traceback" not in bot.log()


def test_a_resource_together_says_is_gone_is_asked_about_once(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    """Together answers 404 for the resource a stopped session leaves: the check
    is over, not asked again every interval for a day. Another session's queued
    resource, looked at on every run, shows the runs go on."""
    together.add_resource("res-queued", "PENDING")
    together.add(SID, "RUNNING", model_resources_id="res-gone")
    together.add(SID_OTHER, "CREATING", model_resources_id="res-queued")
    together.fail("res-gone", status=404)  # Together's own JSON 404, for good
    bot = start_bot(**FOLLOW_UP_ONLY)
    for sid, channel in ((SID, "C123"), (SID_OTHER, "C456")):
        token = f"sub-{channel}"
        bot.command(f"subscribe {sid}", response_url=slack.response_url(token), channel_id=channel)
        assert "Subscribed" in json.dumps(slack.wait_for_response(token))
    together.set_status(SID, "STOPPED")
    together.set_status(SID_OTHER, "STOPPED")
    assert wait_until(lambda: answered_reads(together, "res-gone"), what="a look") == [404]
    looked = len(answered_reads(together, "res-queued"))
    wait_until(
        lambda: len(answered_reads(together, "res-queued")) >= looked + 3,
        what="three more runs of the check",
    )
    assert answered_reads(together, "res-gone") == [404]
    assert idle_posts(slack, "C123") == []


@pytest.mark.backend_independent("Together's pages; the told-once rows are tested on both")
def test_a_failed_later_page_of_ready_resources_keeps_the_alerts_already_found(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    """The org-wide watch finds an idle resource on the first page of READY
    resources; the second page fails (Together's 500, every time). What the first
    page showed is still alerted."""
    long_ago = (datetime.now(UTC) - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    together.add_resource("res-idle", "READY", updated_at=long_ago)
    for i in range(120):  # a second page; READY just now, so not idle yet
        together.add_resource(f"res-fill-{i:03d}", "READY")
    together.fail(None, status=500, matching="after=res-fill-")
    start_bot(**FAST | {"IDLE_RESOURCE_ALERT_MINUTES": "60"})
    wait_until(lambda: idle_posts(slack, OPS), what="the idle alert on-call", timeout=20)
    [page] = idle_posts(slack, OPS)
    assert "res-idle" in (page.text or "")
    failed = [r for r in list(together.requests) if "after=res-fill-" in r.path]
    assert failed and all(r.status == 500 for r in failed)  # the second page did fail


def test_the_follow_ups_own_marks_do_not_keep_an_ended_watch_in_its_window(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    """The check looks at watches that ended within a day (and at most so many
    of them). Its marks must not move when a watch ended, or a resource that never
    turns READY would be looked at for ever and the watch never pruned."""
    together.add_resource("res-queued", "PENDING")
    together.add(SID, "CREATING", model_resources_id="res-queued")
    bot = start_bot(**FOLLOW_UP_ONLY)
    bot.command(f"subscribe {SID}", response_url=slack.response_url("sub"))
    assert "Subscribed" in json.dumps(slack.wait_for_response("sub"))
    together.set_status(SID, "STOPPED")

    def ended_at() -> Any:
        rows = query(db_url, "SELECT active, updated_at FROM watched_sessions")
        return rows[0][1] if rows and not rows[0][0] else None

    wait_until(lambda: answered_reads(together, "res-queued"), what="a look")
    first = wait_until(ended_at, what="the watch ended")
    looked = len(answered_reads(together, "res-queued"))
    wait_until(
        lambda: len(answered_reads(together, "res-queued")) >= looked + 3,
        what="three more looks, each marked",
    )
    assert ended_at() == first
