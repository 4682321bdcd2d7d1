"""A root card redrawn at once when a person changes what it shows (a budget, a
metric rule, a mute, the thread's options): one outbox row, written in the
change's own transaction, that delivery sends before any routine redraw and
draws from what is stored then (`bot.outbox.order`). A change for every session
of a channel (a rule on `*`) owes each of its cards a redraw, paced with the
routine ones."""

from __future__ import annotations

import uuid

from bot.outbox.contract.rows import Thread, card_now_row, card_row
from bot.outbox.queue import insert_outbox
from bot.store.queries.subscriptions import active_subscription, channel_subscriptions
from bot.store.rule_tables import EVERY_SESSION
from bot.store.session import Db


async def redraw_card(
    db: Db, *, team_id: str, channel_id: str, session_id: str | None, what: str
) -> bool:
    """Queue the redraw of this channel's card of the session (none when the channel
    does not follow it, or `session_id` is None: a change no card shows), or with
    `*` of every card of the channel; `what` names the change in the rows' key.
    True when one was queued."""
    if session_id is None:
        return False
    key = f"{what}:{uuid.uuid4().hex}"
    if session_id == EVERY_SESSION:
        subs = await channel_subscriptions(db=db, team_id=team_id, channel_id=channel_id)
        rows = [
            card_row(Thread(sub.id, sub.session_id, sub.channel_id, sub.root_ts), key=key)
            for sub, _ in subs
        ]
        await insert_outbox(db, rows)
        return bool(rows)
    sub = await active_subscription(
        db, team_id=team_id, channel_id=channel_id, session_id=session_id
    )
    if sub is None:
        return False
    thread = Thread(sub.id, sub.session_id, sub.channel_id, sub.root_ts)
    await insert_outbox(db, [card_now_row(thread, key=key)])
    return True
