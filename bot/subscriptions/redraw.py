"""A root card redrawn at once when a person changes what it shows (a budget, a
metric rule, a mute, the thread's options): one outbox row, written in the
change's own transaction, that delivery sends before any routine redraw and
draws from what is stored then (`bot.outbox.order`)."""

from __future__ import annotations

import uuid

from bot.outbox.contract.rows import Thread, card_now_row
from bot.outbox.queue import insert_outbox
from bot.store.queries.subscriptions import active_subscription
from bot.store.session import Db


async def redraw_card(
    db: Db, *, team_id: str, channel_id: str, session_id: str | None, what: str
) -> bool:
    """Queue the redraw of this channel's card of the session (none when the channel
    does not follow it, or `session_id` is None: a channel-wide change); `what`
    names the change in the row's key. True when one was queued."""
    if session_id is None:
        return False
    sub = await active_subscription(
        db, team_id=team_id, channel_id=channel_id, session_id=session_id
    )
    if sub is None:
        return False
    thread = Thread(sub.id, sub.session_id, sub.channel_id, sub.root_ts)
    await insert_outbox(db, [card_now_row(thread, key=f"{what}:{uuid.uuid4().hex}")])
    return True
