"""Keep alive 1 h on a stall or idle-resource alert: the same allowlist as Stop
(STOP_ALLOWED_USER_IDS, STOP_ALLOWED_USERGROUP), then Together's extend-expiry
for KEEP_ALIVE_SECONDS; the clicked alert then says who kept it up and its new
`expires_at`. Slack has already shown the confirm dialog. Together's refusal
(a resource that is not READY) is told in its own words."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.commands.asker import Asker
from bot.commands.deps import CommandDeps
from bot.commands.stop import may_stop
from bot.rendering.actions import KEEP_ALIVE_SECONDS, kept_alive
from bot.rendering.blocks import Message
from bot.rendering.refusals import (
    allowlist_refusal,
    keep_gone,
    keep_not_sent,
    keep_refused,
    keep_unknown,
)
from bot.subscriptions.thread import refusal_logged
from bot.together.errors import TogetherError
from bot.training.resources import ModelResource

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeptAlive:
    """What a Keep alive click did: refused (why), or Together's resource now."""

    refusal: str | None = None
    resource: ModelResource | None = None


async def keep_alive(
    deps: CommandDeps,
    *,
    asker: Asker,
    resource_id: str,
    message_ts: str | None,
    clicked: Message,
) -> KeptAlive:
    """Check who asks, ask Together to keep the resource up an hour, and note it
    on the clicked alert. A TogetherError is logged and raised (`keep_failed`
    words it)."""
    settings, together, slack = deps.settings, deps.together, deps.slack
    who = {"user_id": asker.user_id, "model_resources_id": resource_id}
    refusal = await may_stop(settings=settings, slack=slack, user_id=asker.user_id)
    if refusal is not None:
        log.warning("keep alive refused", extra=who)
        return KeptAlive(refusal=allowlist_refusal(refusal, "keep alive"))
    try:
        resource = await together.extend_expiry(resource_id, KEEP_ALIVE_SECONDS)
    except TogetherError as exc:
        log.warning("keep alive failed: %s", exc, extra=who | {"together": exc.kind})
        raise
    log.info("model resource kept alive", extra=who | {"expires_at": str(resource.expires_at)})
    if message_ts and clicked.get("blocks"):
        updated = kept_alive(clicked, asker.user_id, resource)
        with refusal_logged("show the new expiry", asker.channel_id):
            await slack.update(
                channel=asker.channel_id,
                ts=message_ts,
                text=updated["text"],
                blocks=updated["blocks"],
            )
    return KeptAlive(resource=resource)


def keep_failed(exc: TogetherError) -> str:
    """A Keep alive Together did not do, in words for the person: gone, refused
    in Together's own words (a resource that is not READY), or not known."""
    if exc.kind == "not_found":
        return keep_gone()
    if exc.kind in ("auth", "rate_limited", "invalid_id"):
        return keep_not_sent(exc.user_message)
    status = exc.status
    if status is not None and 400 <= status < 500:
        return keep_refused(exc.together_message, status)
    return keep_unknown()
