"""Resources and edges, through a real `rl-bot serve`: no transaction
held while Slack is slow, a cached readiness check, App Home under a channel
allowlist, one process per SQLite file, and API text that must not link or ping.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.conftest import BotLauncher
from tests.support import BotFactory, BotProcess, query, wait_until
from tests.support.home import open_home

pytestmark = pytest.mark.slow

SID = "123e4567-e89b-12d3-a456-426614174000"


def is_postgres(db_url: str) -> bool:
    return db_url.startswith("postgres")


# --- 10. no transaction across a Slack call ----------------------------------------------------


def test_subscribing_while_slack_is_slow_holds_no_database_connection(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    bot = start_bot()
    sids = [f"slow-session-{i:02d}" for i in range(24)]
    for sid in sids:
        together.add(sid)
    # Each post hangs until the checks below are done (`end_waits` then answers them),
    # at most 9.5 s: the bot's Slack client gives up after 10 s, and a subscribe whose
    # post timed out would not answer "Subscribed" below.
    slack.method_latency["chat.postMessage"] = 9.5
    for i, sid in enumerate(sids):
        response = bot.command(
            f"subscribe {sid}", response_url=slack.response_url(sid), channel_id=f"C{i:03d}"
        )
        assert response.status_code == 200
    # Every subscribe is now waiting on its root post; a
    # transaction held across one would be over a second old a second from now.
    slack.wait_for(
        lambda s: s.in_flight >= len(sids),
        timeout=20,
        message="every root post in flight (subscribes waiting on a connection held across a post?)",
    )
    time.sleep(1.0)
    held = None
    if is_postgres(db_url):
        # Short transactions of the poller and housekeeping may be caught between
        # two statements (CI's loaded machine caught four); none lasts a second.
        held = query(
            db_url,
            "SELECT now() - xact_start, left(query, 200) FROM pg_stat_activity "
            "WHERE datname = current_database() AND state = 'idle in transaction' "
            "AND now() - xact_start > interval '1 second'",
        )
    started = time.monotonic()
    ready = httpx.get(f"{bot.url}/readyz", timeout=30)
    readyz = time.monotonic() - started
    print(f"transactions held while posts hang: {held}; /readyz {readyz:.2f}s")
    assert slack.in_flight >= len(sids)  # still hanging: the check above was in time
    slack.method_latency.pop("chat.postMessage")
    slack.end_waits()
    assert ready.status_code == 200, ready.text
    assert readyz < 2.0  # 2.8 s when connections sat idle in transaction
    if held is not None:
        assert held == []
    answers = [slack.wait_for_response(sid, timeout=40) for sid in sids]
    assert all("Subscribed" in json.dumps(a) for a in answers), answers
    assert query(db_url, "SELECT count(*) FROM subscriptions WHERE active") == [(24,)]


# --- 11. /readyz asks Slack at most once a minute ------------------------------------------------


@pytest.mark.backend_independent("Slack's answer cached; /readyz's database check runs on both")
def test_readyz_does_not_call_slack_on_every_request(bot: BotProcess, slack: FakeSlack) -> None:
    before = len(slack.calls_to("auth.test"))

    def probe(_: int) -> int:
        return httpx.get(f"{bot.url}/readyz", timeout=10).status_code

    with ThreadPoolExecutor(10) as pool:
        statuses = list(pool.map(probe, range(50)))
    calls = len(slack.calls_to("auth.test")) - before
    print(f"50 /readyz -> {calls} auth.test calls")
    assert statuses == [200] * 50
    assert calls <= 1


# --- 12. the channel allowlist and App Home ------------------------------------------------------


@pytest.mark.backend_independent("the channel allowlist and App Home's view")
def test_allowed_channel_ids_leave_app_home_working(
    start_bot: BotFactory, slack: FakeSlack
) -> None:
    bot = start_bot(ALLOWED_CHANNEL_IDS="C123")
    open_home(bot, user="U123")
    [publish] = slack.wait_for_calls("views.publish", 1, timeout=10)
    assert publish.params.get("user_id") == "U123"
    # ...while a command from a channel not on the list is still refused.
    refused = bot.command("help", response_url=slack.response_url("x"), channel_id="C999")
    assert "not enabled in this channel" in refused.json()["text"]


@pytest.mark.backend_independent("the channel allowlist")
def test_clicks_in_the_bots_own_dms_pass_the_channel_allowlist(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    bot = start_bot(ALLOWED_CHANNEL_IDS="C123", STOP_ALLOWED_USER_IDS="UALLOWED")
    together.add_resource("res-dm-keep", "READY")
    together.add_resource("res-dm-stop", "READY")
    # A click in a channel not on the list is still dropped.
    bot.click(
        "rl_keep_alive", "res-dm-keep", response_url=slack.response_url("no"), channel_id="C9"
    )
    # Keep alive and Stop resource on the bot's own DM (an IM channel, D…) act.
    dm = {"ts": "1700000009.000100", "text": "idle resource", "blocks": []}
    bot.click(
        "rl_keep_alive",
        "res-dm-keep",
        response_url=slack.response_url("keep"),
        channel_id="D0DANA",
        user_id="UALLOWED",
        is_ephemeral=False,
        message=dm,
    )
    wait_until(lambda: together.extend_requests, what="the DM's Keep alive reaching Together")
    assert together.extend_requests == [("res-dm-keep", 3600)]
    bot.click(
        "rl_stop_resource",
        "res-dm-stop",
        response_url=slack.response_url("stop"),
        channel_id="D0DANA",
        user_id="UALLOWED",
        is_ephemeral=False,
        message=dm,
    )
    wait_until(lambda: together.resource_stop_requests, what="the DM's Stop resource")
    assert [r for r, _ in together.resource_stop_requests] == ["res-dm-stop"]
    # Someone not allowed is told why, in the DM.
    bot.click(
        "rl_keep_alive", "res-dm-keep", response_url=slack.response_url("bob"), channel_id="D0BOB"
    )
    assert "not allowed to keep model resources up" in json.dumps(slack.wait_for_response("bob"))
    assert together.extend_requests == [("res-dm-keep", 3600)]


# --- 13. one process per SQLite file ---------------------------------------------------------------


def test_a_second_process_on_the_same_sqlite_file_refuses_to_start(
    start_bot: BotFactory, launch_bot: BotLauncher, db_url: str
) -> None:
    if is_postgres(db_url):
        pytest.skip("several processes on one PostgreSQL database are supported")
    first = start_bot()
    second = launch_bot("second", wait=False)
    try:
        code = second.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        second.stop()
    print(f"second process: exit {code}: {second.log().strip()[-300:]}")
    assert code == 4, second.log_tail()
    assert "another rl-bot process" in second.log()
    assert f"pid {first.proc.pid}" in second.log()
    assert httpx.get(f"{first.url}/healthz").status_code == 200
    # Once the first has stopped, a new process starts.
    first.terminate()
    start_bot()


# --- 14. API text cannot link or mention -------------------------------------------------------------

HOSTILE = "@here <!channel> see https://evil.example/x and www.evil.example #general @channel"
# What Slack would turn into a link or a mention in text it parses.
AUTOLINKED = re.compile(r"https?://|www\.\w|evil\.example|@here|@channel|#general|<!channel>")


def _text_objects(value: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        if value.get("type") in ("mrkdwn", "plain_text") and isinstance(value.get("text"), str):
            found.append(value)
        for item in value.values():
            found += _text_objects(item)
    elif isinstance(value, list):
        for item in value:
            found += _text_objects(item)
    return found


@pytest.mark.backend_independent("what Slack is sent")
def test_api_text_cannot_become_a_link_or_a_mention(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    bot = start_bot(ONCALL_CHANNEL="COPS")
    together.add(SID, display_name=HOSTILE, base_model=HOSTILE, created_by=HOSTILE)
    bot.command(f"subscribe {SID}", response_url=slack.response_url("sub"), channel_id="C1")
    assert "Subscribed" in json.dumps(slack.wait_for_response("sub"))
    bot.command(SID, response_url=slack.response_url("card"), channel_id="C1")
    slack.wait_for_response("card")
    error = {"code": HOSTILE, "message": HOSTILE, "occurred_at": datetime.now(UTC).isoformat()}
    together.set_status(SID, "ERROR", error=error)
    wait_until(lambda: slack.successful_posts("COPS"), what="on-call alert")
    wait_until(
        lambda: [c for c in slack.successful_posts("C1") if c.thread_ts], what="thread reply"
    )
    time.sleep(1)  # the root card update follows the reply

    messages: list[tuple[str, Any, Any]] = [
        (c.method, c.text, c.blocks)
        for c in slack.calls
        if c.method in ("chat.postMessage", "chat.update", "chat.postEphemeral")
    ]
    messages += [
        (f"response {token}", body.get("text"), body.get("blocks"))
        for token in ("sub", "card")
        for body in slack.responses[token]
    ]
    assert len(messages) >= 5, messages
    shown_hostile = 0
    for where, text, blocks in messages:
        for obj in _text_objects(blocks):
            if obj["type"] == "mrkdwn":
                assert obj.get("verbatim") is True, (where, obj)
            assert "<!channel>" not in obj["text"], (where, obj)
            shown_hostile += "evil" in obj["text"]
        assert isinstance(text, str)
        assert not AUTOLINKED.search(text), (where, text)
    assert shown_hostile, "the hostile text was not shown at all"
