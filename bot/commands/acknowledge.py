"""Acknowledge on an on-call page: the first click takes the alert (stored with
the database's clock), the alert then says who is on it and since when, and a
queued repage of it is cancelled; a later click is told who has it. Only the
channel the page was posted in can acknowledge it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from bot.commands.asker import Asker, Sessionmaker
from bot.outbox.oncall_pages import cancel_repage, page_row
from bot.rendering.actions import acknowledged
from bot.rendering.blocks import Message
from bot.rendering.refusals import UNKNOWN_ALERT
from bot.slack_web import SlackWeb
from bot.store.queries.alert_acks import alert_ack, take_alert
from bot.subscriptions.thread import refusal_logged

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Ack:
    """Who has the alert and since when; `taken` when this click took it."""

    user_id: str
    at: datetime
    taken: bool


async def acknowledge(
    *,
    sessionmaker: Sessionmaker,
    slack: SlackWeb,
    asker: Asker,
    alert_id: int,
    message_ts: str | None,
    clicked: Message,
) -> Ack | str:
    """Take the alert for the asker unless someone has it; redraw the clicked
    alert when this click took it. A string is why it cannot be acknowledged."""
    async with sessionmaker() as db, db.begin():
        page = await page_row(db, alert_id)
        if page is None or page.channel_id != asker.channel_id:
            return UNKNOWN_ALERT
        before = await alert_ack(db, alert_id)
        ack = before or await take_alert(
            db, outbox_id=alert_id, channel_id=asker.channel_id, user_id=asker.user_id
        )
        taken = before is None and ack.user_id == asker.user_id
        if taken:
            await cancel_repage(db, alert_id)
        result = Ack(ack.user_id, ack.acked_at, taken)
    who = {"user_id": asker.user_id, "outbox_id": alert_id, "channel_id": asker.channel_id}
    log.info("alert acknowledged" if taken else "alert already taken", extra=who)
    if taken and message_ts and clicked.get("blocks"):
        updated = acknowledged(clicked, result.user_id, result.at)
        with refusal_logged("show who took the alert", asker.channel_id):
            await slack.update(
                channel=asker.channel_id,
                ts=message_ts,
                text=updated["text"],
                blocks=updated["blocks"],
            )
    return result
