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
from typing import Any

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp

from bot.config import Settings
from bot.metrics import Metrics
from bot.runtime import build_runtime
from bot.slack.app import build_app
from bot.slack.web import create_web_app, http_server

log = logging.getLogger(__name__)


class TimedSocketModeHandler(AsyncSocketModeHandler):
    """Observes rlbot_ack_seconds per envelope, as `POST /slack/events` does in HTTP mode.

    `handle` returns once Bolt has acknowledged the envelope over the socket (the
    listener's work after `ack()` goes on in the background).
    """

    def __init__(self, app: AsyncApp, app_token: str, metrics: Metrics) -> None:
        super().__init__(app, app_token)
        self._metrics = metrics

    async def handle(self, client: Any, req: Any) -> None:
        started = time.monotonic()
        try:
            await super().handle(client, req)
        finally:
            self._metrics.ack_seconds.observe(time.monotonic() - started)


async def run_socket(settings: Settings, *, host: str, port: int) -> int:
    assert settings.slack_app_token is not None
    rt = build_runtime(settings)
    bolt = build_app(rt)
    handler = TimedSocketModeHandler(bolt, settings.slack_app_token.get_secret_value(), rt.metrics)

    async def socket_up() -> bool:
        try:
            return bool(await handler.client.is_connected())
        except Exception:
            return False

    web = create_web_app(rt, bolt, socket_connected=socket_up, http_events=False)
    server = http_server(web, host=host, port=port)
    # uvicorn owns SIGTERM/SIGINT: its graceful shutdown stops the scheduler
    # and releases leases (the web app's lifespan); then the socket closes.
    web_task = asyncio.create_task(server.serve())
    try:
        await handler.connect_async()
    except Exception as exc:  # keep serving /healthz (503) and retry
        log.error("Socket Mode connection failed: %s", type(exc).__name__)
    reconnect = asyncio.create_task(_keep_connected(handler))
    try:
        await web_task
    finally:
        reconnect.cancel()
        try:
            await handler.close_async()
        except Exception:
            log.warning("Socket Mode close failed", exc_info=True)
    return 0


async def _keep_connected(handler: AsyncSocketModeHandler) -> None:
    """Check the socket every few seconds and reconnect at once when it is down:
    slack-sdk's own retry after a drop waits longer (about 10 s)."""
    delay = 2.0
    while True:
        await asyncio.sleep(delay)
        try:
            if not await handler.client.is_connected():
                await handler.connect_async()
                delay = 2.0
        except Exception as exc:
            log.warning("Socket Mode reconnect failed: %s", type(exc).__name__)
            delay = min(delay * 2, 60.0)
