"""The Bolt app: verification, allowlists and the runtime in every context.

Listeners live in `bot.slack.listeners`, each package registering itself.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_bolt.response import BoltResponse

from bot.runtime import Runtime
from bot.slack import listeners

log = logging.getLogger(__name__)

HOME_EVENTS = frozenset({"app_home_opened"})
# Bolt log lines that end with the request body (slack_bolt.logger.messages).
BODY_LOG_PREFIXES = (
    "Unhandled request",
    "A global middleware",
    "Invalid request signature detected",
)
# Bolt reads SLACK_BOT_TOKEN from the environment itself and warns, at every start,
# that the client we hand it wins; nothing is wrong (slack_bolt.logger.messages).
TOKEN_SKIPPED = "As you gave `client` as well, `token` will be unused."


def build_app(rt: Runtime) -> AsyncApp:
    settings = rt.settings
    signing = settings.slack_signing_secret
    bolt_log = logging.getLogger("bot.bolt")
    if not any(isinstance(f, NoRequestBodies) for f in bolt_log.filters):
        bolt_log.addFilter(NoRequestBodies())  # Bolt's loggers copy their base's filters
    app = AsyncApp(
        # Named here: without a name Bolt takes its caller's file name from
        # `inspect.stack()`, which reads the source of every frame (a third of a
        # second of CPU at each start). The name is the one Bolt found before.
        name="app.py",
        client=rt.slack.client,
        signing_secret=signing.get_secret_value() if signing else "socket-mode",
        # `bot.slack.web` verifies the signature over the raw bytes before Bolt parses
        # anything; Bolt's verifier would parse first and log failing bodies.
        request_verification_enabled=False,
        raise_error_for_unhandled_request=False,
        logger=bolt_log,
    )

    @app.middleware
    async def attach_runtime(
        context: AsyncBoltContext, body: dict[str, Any], next: Callable[[], Awaitable[BoltResponse]]
    ) -> BoltResponse | None:
        context["rt"] = rt
        team = context.team_id or ""
        channel = context.channel_id or ""
        if settings.allowed_team_ids and team not in settings.allowed_team_ids:
            log.warning("request from a workspace not allowed", extra={"team_id": team})
            return await _refuse(context, body, "rl-bot is not enabled for this workspace.")
        if (
            settings.allowed_channel_ids
            and channel
            and channel not in settings.allowed_channel_ids
            and not _is_home(body)
            and not _is_dm_click(body, channel)
        ):
            return await _refuse(context, body, "rl-bot is not enabled in this channel.")
        return await next()

    listeners.register(app)
    return app


def _is_home(body: dict[str, Any]) -> bool:
    """The App Home tab: its event carries the user's DM channel, where the bot
    posts nothing. `ALLOWED_CHANNEL_IDS` limits the channels the bot posts in."""
    event = body.get("event")
    return isinstance(event, dict) and event.get("type") in HOME_EVENTS


def _is_dm_click(body: dict[str, Any], channel: str) -> bool:
    """A button on a message in a direct message: Slack sends a click only to the
    app that posted the message, so it is one of the bot's own DMs (a personal or
    creator alert) and acts on a resource or session, not on a channel. Commands
    typed in a DM are still held to the allowlist."""
    return body.get("type") == "block_actions" and channel.startswith("D")


class NoRequestBodies(logging.Filter):
    """Bolt writes request bodies into some log lines (unhandled requests, a
    middleware that answered nothing); keep the line, drop the body. Bolt's
    start-up warning about the token (`TOKEN_SKIPPED`) is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message == TOKEN_SKIPPED:
            return False
        for prefix in BODY_LOG_PREFIXES:
            if message.startswith(prefix):
                record.msg, record.args = f"{prefix} (request body not logged)", None
        return True


async def _refuse(context: AsyncBoltContext, body: dict[str, Any], text: str) -> BoltResponse:
    # Commands get a visible, ephemeral answer; everything else a quiet 200.
    if body.get("command"):
        return BoltResponse(
            status=200,
            body={"response_type": "ephemeral", "text": text},
        )
    return BoltResponse(status=200, body="")
