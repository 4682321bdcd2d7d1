"""`rl-bot socket` end to end: a real process over a fake Slack Socket Mode websocket.

The bot asks `SocketModeSlack` (FakeSlack plus `apps.connections.open`) for a socket URL with
its xapp- token, connects to `FakeSocketMode`, and gets slash commands and button clicks as
envelopes; it must acknowledge each over the socket and answer through response_url and the
Web API as in HTTP mode. No signing secret is configured: none is needed in this mode.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, Protocol

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.simulated import FakeTogether, sign
from tests.conftest import BotLauncher
from tests.fakes.socket_mode import FakeSocketMode, SocketModeSlack
from tests.support import SIGNING_SECRET, BotProcess, query, wait_until

pytestmark = pytest.mark.backend_independent("the Socket Mode transport; the database only stores")

SID = "123e4567-e89b-12d3-a456-426614174000"
APP_TOKEN = "xapp-1-A1-1234567890-apptokensecret"


class SocketBotFactory(Protocol):
    def __call__(self, *, wait: bool = True, **env: str) -> BotProcess: ...


@pytest.fixture
def slack() -> Iterator[SocketModeSlack]:
    """Overrides conftest's `slack`: the same fake, plus `apps.connections.open`."""
    with SocketModeSlack() as fake:
        yield fake


@pytest.fixture
def ws(slack: SocketModeSlack) -> Iterator[FakeSocketMode]:
    with FakeSocketMode() as server:
        slack.socket_url = server.url
        yield server


@pytest.fixture
def start_socket_bot(
    ws: FakeSocketMode,  # set up before the bots and so torn down after them
    launch_bot: BotLauncher,
) -> SocketBotFactory:
    def factory(*, wait: bool = True, **env: str) -> BotProcess:
        bot = launch_bot(
            "socket-bot",
            env={"SLACK_APP_TOKEN": APP_TOKEN, **env},
            command="socket",
            wait=False,
            unset=("SLACK_SIGNING_SECRET",),
        )
        if wait:
            bot.wait_healthy()
        return bot

    return factory


@pytest.fixture
def socket_bot(start_socket_bot: SocketBotFactory) -> BotProcess:
    return start_socket_bot()


def healthz(bot: BotProcess) -> int:
    try:
        return httpx.get(f"{bot.url}/healthz", timeout=2).status_code
    except httpx.HTTPError:
        return 0


def metric(bot: BotProcess, name: str, labels: dict[str, str] | None = None) -> float:
    text = httpx.get(f"{bot.url}/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(
                sample.labels.get(k) == v for k, v in (labels or {}).items()
            ):
                return float(sample.value)
    return 0.0


def posts(slack: SocketModeSlack, channel: str, *, thread: str | None = None) -> list[Any]:
    return [c for c in slack.successful_posts(channel) if c.thread_ts == thread]


def test_connects_with_the_app_token_and_serves_only_health_and_metrics_over_http(
    socket_bot: BotProcess, slack: SocketModeSlack, ws: FakeSocketMode
) -> None:
    # /healthz is 200 only once connected (see the next tests for 503).
    conn = ws.wait_connected()
    assert conn.path == "/link/" and conn.query.get("ticket")
    [open_call] = slack.calls_to("apps.connections.open")
    assert open_call.token == APP_TOKEN  # the app-level token, not the bot token
    assert ws.handler_errors == []

    # No signing secret here, so nothing may be accepted over HTTP.
    body = "command=%2Frl-session&text=help&channel_id=C123&user_id=U123&team_id=T1"
    signed = httpx.post(
        f"{socket_bot.url}/slack/events", content=body, headers=sign(SIGNING_SECRET, body)
    )
    assert signed.status_code == 404
    assert httpx.post(f"{socket_bot.url}/slack/events", content=body).status_code == 404
    assert httpx.get(f"{socket_bot.url}/metrics").status_code == 200
    ready = httpx.get(f"{socket_bot.url}/readyz")
    assert ready.status_code == 200, ready.text
    assert "SLACK_SIGNING_SECRET" not in socket_bot.env

    # SIGTERM: the lifespan shuts the ticker down and the process ends.
    assert socket_bot.terminate() in (0, -15)
    assert "releasing leases" in socket_bot.log()


def test_commands_are_acked_over_the_socket_and_answered_at_response_url(
    socket_bot: BotProcess, slack: SocketModeSlack, ws: FakeSocketMode, together: FakeTogether
) -> None:
    together.add(SID, display_name="gsm8k-experiment-2")
    ws.wait_connected()

    show = ws.slash_command(SID, response_url=slack.response_url("show"))
    ack = ws.wait_for_ack(show, timeout=5)
    latency = ws.ack_latency(show)
    assert latency is not None and latency < 1.9, latency  # Slack allows 3 s
    assert ack.data == {"envelope_id": show}  # a bare ack: the card follows at response_url
    card = slack.wait_for_response("show")
    assert card["response_type"] == "in_channel"
    assert "gsm8k-experiment-2" in json.dumps(card["blocks"])

    # help is answered in the ack itself (the envelope's response payload).
    usage = ws.slash_command("help", response_url=slack.response_url("help"))
    payload = ws.wait_for_ack(usage, timeout=5).data.get("payload")
    assert payload and payload["response_type"] == "ephemeral"
    assert "/rl-session" in json.dumps(payload)

    # A bad id is refused in the ack, and nothing reaches Together for it.
    before = together.total_requests
    bad = ws.slash_command(
        "<https://x.example/../../etc/passwd>", response_url=slack.response_url("bad")
    )
    refused = ws.wait_for_ack(bad, timeout=5).data.get("payload")
    assert refused and "not a session id" in json.dumps(refused)
    assert together.total_requests == before

    # Metrics count socket traffic the way they count HTTP traffic.
    assert metric(socket_bot, "rlbot_commands_total", {"verb": "show", "outcome": "ok"}) == 1
    assert metric(socket_bot, "rlbot_commands_total", {"verb": "help", "outcome": "usage"}) == 1
    assert metric(socket_bot, "rlbot_ack_seconds_count") >= 3


def test_subscription_over_the_socket_is_polled_and_told_in_its_thread(
    socket_bot: BotProcess,
    slack: SocketModeSlack,
    ws: FakeSocketMode,
    together: FakeTogether,
    db_url: str,
) -> None:
    together.add(SID)
    ws.wait_connected()
    sub = ws.slash_command(
        f"subscribe {SID}", channel_id="C7", response_url=slack.response_url("s")
    )
    ws.wait_for_ack(sub, timeout=5)
    assert "Subscribed" in str(slack.wait_for_response("s"))
    [root] = wait_until(lambda: posts(slack, "C7"), what="root card")
    assert root.ts and "rl_unsubscribe" in json.dumps(root.blocks)

    together.set_status(SID, "STOPPING")  # the poller runs in socket mode too
    [reply] = wait_until(lambda: posts(slack, "C7", thread=root.ts), what="thread reply")
    assert "Running" in (reply.text or "") and "Stopping" in (reply.text or "")

    # The root card's Unsubscribe button, clicked: an `interactive` envelope.
    click = ws.interactive(
        {
            "type": "block_actions",
            "user": {"id": "U123", "username": "alice", "team_id": "T1"},
            "api_app_id": "A1",
            "team": {"id": "T1", "domain": "example"},
            "channel": {"id": "C7", "name": "general"},
            "container": {
                "type": "message",
                "message_ts": root.ts,
                "channel_id": "C7",
                "is_ephemeral": False,
            },
            "message": {"type": "message", "ts": root.ts, "text": "", "blocks": root.blocks},
            "response_url": slack.response_url("click"),
            "trigger_id": "t.2",
            "actions": [
                {
                    "action_id": "rl_unsubscribe",
                    "block_id": "actions",
                    "value": SID,
                    "type": "button",
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }
    )
    assert ws.wait_for_ack(click, timeout=5).data["envelope_id"] == click
    wait_until(
        lambda: query(db_url, "SELECT active FROM subscriptions") == [(False,)],
        what="subscription ended by the button",
    )


def test_a_connection_reset_reconnects_with_a_fresh_url(
    socket_bot: BotProcess, slack: SocketModeSlack, ws: FakeSocketMode, together: FakeTogether
) -> None:
    first = ws.wait_connected()
    assert healthz(socket_bot) == 200
    issued = len(slack.issued_urls)

    # A TCP reset, no close frame: the URL it was opened with is spent (the fake refuses it).
    ws.reset_connections()
    second = ws.wait_connected(count=2, timeout=10)
    assert len(slack.issued_urls) > issued, "reconnected without apps.connections.open"
    assert second.query["ticket"] != first.query["ticket"]
    assert ws.refused == []  # the spent URL was never tried again
    wait_until(lambda: healthz(socket_bot) == 200, timeout=5, what="healthy again")

    together.add(SID)
    show = ws.slash_command(SID, response_url=slack.response_url("after-reset"))
    assert ws.wait_for_ack(show, timeout=5).connection == second.id
    assert SID in json.dumps(slack.wait_for_response("after-reset"))
    assert len(ws.connections) == 2 and ws.handler_errors == []


def test_healthz_follows_the_socket(
    socket_bot: BotProcess, slack: SocketModeSlack, ws: FakeSocketMode, together: FakeTogether
) -> None:
    first = ws.wait_connected()
    assert healthz(socket_bot) == 200

    # Slack's refresh: a `disconnect` message, then a new socket from a new URL.
    ws.send_disconnect()
    second = ws.wait_connected(count=2, timeout=15)
    assert second.query["ticket"] != first.query["ticket"]
    assert len(slack.calls_to("apps.connections.open")) >= 2
    wait_until(lambda: healthz(socket_bot) == 200, timeout=10, what="healthy again")
    together.add(SID)
    again = ws.slash_command(SID, response_url=slack.response_url("after-refresh"))
    assert ws.wait_for_ack(again, timeout=5).connection == second.id
    slack.wait_for_response("after-refresh")

    # Slack gone: unhealthy within a few seconds, and the process keeps running.
    ws.stop()
    wait_until(lambda: healthz(socket_bot) == 503, timeout=5, what="/healthz 503")
    body = httpx.get(f"{socket_bot.url}/healthz").json()
    assert body == {"ok": False, "socket": "disconnected"}
    # It keeps trying, each time with a fresh URL (a URL whose connect failed is not retried).
    issued = len(slack.issued_urls)
    wait_until(lambda: len(slack.issued_urls) >= issued + 2, timeout=15, what="fresh URLs")
    assert healthz(socket_bot) == 503 and socket_bot.proc.poll() is None

    # Slack back (same address): reconnected and healthy.
    connected_before = len(ws.connections)
    ws.start()
    wait_until(lambda: healthz(socket_bot) == 200, timeout=20, what="reconnected")
    assert len(ws.connections) > connected_before
    assert ws.refused == []


# Transport only, and slow-ish (the bot backs off between failed connects):
# SQLite is enough.
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_unhealthy_until_slack_hands_out_a_socket(
    start_socket_bot: SocketBotFactory, slack: SocketModeSlack, ws: FakeSocketMode
) -> None:
    slack.socket_url = None  # apps.connections.open fails
    bot = start_socket_bot(wait=False)
    wait_until(lambda: healthz(bot) == 503, timeout=20, what="/healthz answering 503")
    wait_until(lambda: slack.calls_to("apps.connections.open"), what="a connection attempt")
    assert healthz(bot) == 503
    # The database and Slack auth are fine: only the socket is missing.
    assert httpx.get(f"{bot.url}/readyz").status_code == 200
    assert bot.proc.poll() is None
    wait_until(lambda: "Socket Mode connection failed" in bot.log(), what="a failed attempt")
    assert "rl-bot ready" not in bot.log()  # Slack cannot reach it yet

    slack.socket_url = ws.url
    wait_until(lambda: healthz(bot) == 200, timeout=20, what="connected once Slack answers")
    assert len(ws.open_connections()) == 1
    wait_until(lambda: "rl-bot ready" in bot.log(), timeout=10, what="ready, once connected")
    log = bot.log()
    assert log.count("rl-bot ready") == 1
    assert log.index("Socket Mode connected") < log.index("rl-bot ready")


def test_apps_connections_open_refuses_a_bot_token(slack: SocketModeSlack) -> None:
    """The fake itself: like Slack, only an xapp- token may open a socket."""
    with FakeSocketMode() as server:
        slack.socket_url = server.url
        bad = httpx.post(
            f"{slack.api_url}apps.connections.open", headers={"Authorization": "Bearer xoxb-1"}
        ).json()
        good = httpx.post(
            f"{slack.api_url}apps.connections.open",
            headers={"Authorization": f"Bearer {APP_TOKEN}"},
        ).json()
    assert bad == {"ok": False, "error": "not_allowed_token_type"}
    assert good["ok"] and good["url"].startswith(server.url + "?ticket=")
