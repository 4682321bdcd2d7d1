"""Side messages a request leaves in Slack besides the person's own answer: a
line in a subscription's thread, a redrawn card. Slack refusing one is logged,
never raised, so the answer still reaches the person."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from bot import rendering
from bot.slack_web import SlackApiError, SlackWeb

log = logging.getLogger(__name__)


async def post_in_thread(
    slack: SlackWeb,
    channel_id: str,
    root_ts: str | None,
    message: rendering.Message,
    *,
    what: str = "post in the thread",
) -> bool:
    """Post in a thread (None: in the channel); a refusal is logged as `could not <what>`,
    not raised. True when Slack took it."""
    with refusal_logged(what, channel_id):
        await slack.post(
            channel=channel_id, thread_ts=root_ts, text=message["text"], blocks=message["blocks"]
        )
        return True
    return False


@contextlib.contextmanager
def refusal_logged(what: str, channel_id: str) -> Iterator[None]:
    """A Slack refusal of a side message (a thread line, a card redraw) is
    logged and the request goes on: the person's own answer still matters."""
    try:
        yield
    except SlackApiError as exc:
        log.warning(
            "could not %s: %s", what, exc.response.get("error"), extra={"channel_id": channel_id}
        )
