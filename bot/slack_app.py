"""The Bolt app: verification, allowlists and the runtime in every context.

Listeners live in `bot.listeners`, each package registering itself.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_bolt.response import BoltResponse

from bot import listeners
from bot.runtime import Runtime

log = logging.getLogger(__name__)


def build_app(rt: Runtime) -> AsyncApp:
    settings = rt.settings
    signing = settings.slack_signing_secret
    app = AsyncApp(
        client=rt.slack,
        signing_secret=signing.get_secret_value() if signing else "socket-mode",
        request_verification_enabled=signing is not None,
        raise_error_for_unhandled_request=False,
        logger=logging.getLogger("bot.bolt"),
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
        if settings.allowed_channel_ids and channel and channel not in settings.allowed_channel_ids:
            return await _refuse(context, body, "rl-bot is not enabled in this channel.")
        return await next()

    listeners.register(app)
    return app


async def _refuse(context: AsyncBoltContext, body: dict[str, Any], text: str) -> BoltResponse:
    # Commands get a visible, ephemeral answer; everything else a quiet 200.
    if body.get("command"):
        return BoltResponse(
            status=200,
            body={"response_type": "ephemeral", "text": text},
        )
    return BoltResponse(status=200, body="")
