"""`rl-bot socket`: the same app over Socket Mode, for teams with no public URL.

Slack events arrive over the websocket; the poller and delivery run as in
HTTP mode. A small HTTP server still answers /healthz (503 while the socket is
down), /readyz and /metrics, but never /slack/events: without a signing
secret there is nothing to verify HTTP requests with.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import aiohttp
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.socket_mode.aiohttp import SocketModeClient

from bot.ops.metrics import Metrics
from bot.runtime import build_runtime
from bot.settings.model import Settings
from bot.slack.app import build_app
from bot.slack.preflight import Verdict
from bot.slack.web import create_web_app, http_server

log = logging.getLogger(__name__)

#: how often the supervisor looks at the socket: a socket that died without a close frame
#: (a TCP reset) is noticed within this long
CHECK_SECONDS = 1.0
#: the wait after a failed connect, doubled after each failure up to the cap
RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0
#: a websocket handshake that takes longer is given up, and the next try gets a new URL
HANDSHAKE_SECONDS = 15.0


class FreshUrlSocketModeClient(SocketModeClient):
    """slack-sdk's aiohttp Socket Mode client, with every connect on a URL no attempt has used.

    Slack's socket URLs are temporary: good for one connection, and they expire. The SDK's
    `connect` keeps the URL it holds and retries it every ping interval until it works, with
    its own reconnects switched off meanwhile, so a spent URL keeps the bot off Slack for good.
    Here a URL is tried once, and a failed attempt raises: `_keep_connected` tries again with a
    new one, after a back-off. The SDK's own reconnects (a close frame, a `disconnect` message,
    a stale ping) go through `connect_to_new_endpoint`, which fetches a URL and calls this.
    """

    async def connect(self) -> None:
        if self.closed:
            return
        url, self.wss_uri = self.wss_uri, None  # spent by this attempt, whatever comes of it
        # As the SDK does: the old socket goes first (Slack limits how many an app may hold),
        # and its receiver must not start a reconnect of its own when it sees the close.
        self.auto_reconnect_enabled = False
        old = self.current_session
        if old is not None and not old.closed:
            try:
                await old.close()
            except Exception as exc:  # a reset socket may fail to close; it is gone anyway
                log.debug("closing the old Socket Mode socket failed: %s", type(exc).__name__)
        if self.aiohttp_client_session.closed:
            self.aiohttp_client_session = aiohttp.ClientSession()
        if url is None:
            url = await self.issue_new_wss_url()
        async with asyncio.timeout(HANDSHAKE_SECONDS):
            session = await self.aiohttp_client_session.ws_connect(
                url,
                autoping=False,
                heartbeat=self.ping_interval,
                proxy=self.proxy,
                ssl=self.web_client.ssl if self.web_client.ssl is not None else True,
            )
        self.current_session = session
        self.stale = False
        self.auto_reconnect_enabled = self.default_auto_reconnect_enabled
        # A new monitor and receiver for the new socket; the old ones end on seeing it.
        if self.current_session_monitor is not None:
            self.current_session_monitor.cancel()
        self.current_session_monitor = asyncio.ensure_future(self.monitor_current_session())
        if self.message_receiver is not None:
            self.message_receiver.cancel()
        self.message_receiver = asyncio.ensure_future(self.receive_messages())
        log.info("Socket Mode connected")
        try:  # the first ping starts the SDK's stale-socket clock
            await session.ping(f"sdk-ping-pong:{time.time()}".encode())
        except Exception as exc:  # the monitor pings again and reconnects if it stays down
            log.warning("Socket Mode first ping failed: %s", type(exc).__name__)


class TimedSocketModeHandler(AsyncSocketModeHandler):
    """Bolt's Socket Mode handler on a `FreshUrlSocketModeClient`, observing rlbot_ack_seconds
    per envelope as `POST /slack/events` does in HTTP mode.

    `handle` returns once Bolt has acknowledged the envelope over the socket (the
    listener's work after `ack()` goes on in the background).
    """

    def __init__(self, app: AsyncApp, app_token: str, metrics: Metrics) -> None:
        # What Bolt's __init__ does, but with our client: Bolt's would build slack-sdk's
        # (and start its message task) only to be replaced.
        self.app = app
        self.app_token = app_token
        self.client = FreshUrlSocketModeClient(
            app_token=app_token, logger=app.logger, web_client=app.client, ping_interval=10
        )
        self.client.socket_mode_request_listeners.append(self.handle)
        self._metrics = metrics

    async def handle(self, client: Any, req: Any) -> None:
        started = time.monotonic()
        try:
            await super().handle(client, req)
        finally:
            self._metrics.ack_seconds.observe(time.monotonic() - started)


async def run_socket(
    settings: Settings, *, host: str, port: int, checked: Sequence[Verdict] = ()
) -> int:
    assert settings.slack_app_token is not None
    rt = build_runtime(settings)
    bolt = build_app(rt)
    handler = TimedSocketModeHandler(bolt, settings.slack_app_token.get_secret_value(), rt.metrics)

    async def socket_up() -> bool:
        try:
            return bool(await handler.client.is_connected())
        except Exception:
            return False

    web = create_web_app(rt, bolt, socket_connected=socket_up, http_events=False, checked=checked)
    server = http_server(web, host=host, port=port)
    # uvicorn owns SIGTERM/SIGINT: its graceful shutdown stops the scheduler
    # and releases leases (the web app's lifespan); then the socket closes.
    web_task = asyncio.create_task(server.serve())
    connection = asyncio.create_task(_keep_connected(handler.client, replica=rt.owner))
    try:
        await web_task
    finally:
        connection.cancel()
        try:
            await handler.close_async()
        except Exception:
            log.warning("Socket Mode close failed", exc_info=True)
    return 0


async def _keep_connected(client: SocketModeClient, *, replica: str = "") -> None:
    """Connect, and whenever the socket is down connect again, each time on a new URL.

    The SDK reconnects by itself after a close frame or a `disconnect` message, but a socket
    that died without a close (a TCP reset, a network gone) it notices only at a ping some
    seconds later, and after a failed attempt it leaves the retrying to us. Failures back off
    (doubling, capped) so a Slack that keeps refusing is not asked for a URL in a tight loop;
    the back-off starts over once a check finds the socket up. The bot is ready
    (and says so, once) when the socket first is: before that Slack cannot reach it.
    """
    delay, backoff = 0.0, RETRY_FIRST_SECONDS
    ready = False
    while True:
        await asyncio.sleep(delay)
        if await client.is_connected():
            delay, backoff = CHECK_SECONDS, RETRY_FIRST_SECONDS
            continue
        try:
            # Waits for a reconnect the SDK has under way, and then does nothing if it worked.
            await client.connect_to_new_endpoint()
        except Exception as exc:
            log.warning(
                "Socket Mode connection failed: %s; next try in %.0f s",
                type(exc).__name__,
                backoff,
            )
        else:
            if not ready and await client.is_connected():
                ready = True
                log.info("rl-bot ready", extra={"replica": replica})
        delay, backoff = backoff, min(backoff * 2, RETRY_MAX_SECONDS)
