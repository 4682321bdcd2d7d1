"""What goes first in a channel, and how many routine card redraws Slack may take now.

A channel's pending rows go out in classes: status changes and errors, then the
alerts, then the root-card redraws a person's change or a refused redraw owes,
then the routine redraws (steps/min, spend). Inside a class a channel's rows go
in the order they were written. A redraw draws what is stored when it is sent
(the newest state), so it never has to wait for the rows before it to be right.

Slack takes about 50 `chat.update` a minute per workspace. The routine redraws
are the only sends that can wait without anyone missing news, so they are the
ones paced: they take what the other updates of the last minute left of
CARD_REDRAWS_PER_MINUTE, and at most a sixth of it in any ten seconds.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, case, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.outbox.contract.payloads import Kind
from bot.outbox.contract.rows import State
from bot.outbox.table import OutboxMessage
from bot.store.tables import db_now

#: told before anything else in their channel
FIRST = (Kind.TRANSITION, Kind.ROOT, Kind.ONCALL, Kind.OPERATOR)
#: rows that only redraw a root card, never post
CARD_ONLY = (Kind.ROOT, Kind.CARD, Kind.CARD_NOW)
#: one waiting row per card stands for every redraw it is owed
REDRAWS = (Kind.CARD, Kind.CARD_NOW)
#: rows whose delivery calls `chat.update` on the root card
UPDATING = (Kind.TRANSITION, Kind.ROOT, Kind.CHECKPOINTS, Kind.PROGRESS, *REDRAWS)

#: the classes, first to last
STATUS, ALERT, REDRAW, ROUTINE = 0, 1, 2, 3
#: the share of a minute's routine redraws any ten seconds may take
_BURST_SHARE = 1 / 6


def send_class(row: Any) -> ColumnElement[int]:
    """SQL: a row's class (`STATUS` … `ROUTINE`). A row whose post went out and whose
    card Slack refused, or a status change told only on the card and refused once,
    owes only a redraw now: it waits with the redraws and blocks no news."""
    return case(
        (row.sent_ts.is_not(None), REDRAW),
        (and_(row.kind == Kind.ROOT, row.attempts > 0), REDRAW),
        (row.kind.in_(FIRST), STATUS),
        (row.kind == Kind.CARD_NOW, REDRAW),
        (row.kind == Kind.CARD, ROUTINE),
        else_=ALERT,
    )


#: what delivery stores of a rate limit (`bot.slack_web.refusals`): the workspace's
RATE_LIMITED = ("ratelimited", "http_429")


def holds_place(row: Any) -> ColumnElement[bool]:
    """SQL: a pending row keeps the rows behind it in its channel waiting. A row
    that is due does, and so does news waiting to be retried (what is told stays
    in order). A redraw backing off from Slack's refusal of that one card does
    not: it draws what is stored whenever it goes, so the channel's other cards
    go on; one waiting out a rate limit does, since the limit is the workspace's."""
    return or_(
        row.next_attempt_at <= db_now(),
        send_class(row) < REDRAW,
        row.last_error.in_(RATE_LIMITED),
    )


def posts(row: Any) -> ColumnElement[bool]:
    """SQL: the row still posts a message (the channel's posting pace applies)."""
    return and_(row.sent_ts.is_(None), row.kind.not_in(CARD_ONLY))


def posts_or_posted(row: Any) -> ColumnElement[bool]:
    """SQL: a row of a kind that posts a message (its `sent_at` is a post's)."""
    kind: ColumnElement[Any] = row.kind
    return kind.not_in(CARD_ONLY)


async def routine_allowed(db: AsyncSession, *, per_minute: float) -> int:
    """How many routine redraws may be sent now: what the card updates of the last
    minute (sent, or leased and under way) left of `per_minute`, and of its sixth
    in the last ten seconds. Every replica's count, by the database's clock."""
    m = OutboxMessage
    sent = and_(m.state == State.SENT, m.kind.in_(UPDATING), m.sent_at > db_now(-60.0))
    under_way = and_(m.state == State.PENDING, m.kind.in_(REDRAWS), m.lease_until > db_now())
    recent = or_(under_way, m.sent_at > db_now(-10.0))
    minute, ten = (
        await db.execute(
            select(
                func.count(),
                func.coalesce(func.sum(case((recent, 1), else_=0)), 0),
            ).where(or_(sent, under_way))
        )
    ).one()
    burst = max(1.0, per_minute * _BURST_SHARE)
    return max(0, min(int(per_minute - minute), int(burst - ten)))
