"""Storing what became of delivered rows, on rows that are still ours."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import Float, Table, and_, bindparam, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.delivery.outcome import SendResult
from bot.outbox.contract.rows import State
from bot.outbox.queue import OutboxMessage, end_subscriptions
from bot.store.tables import db_now


async def record(
    db: AsyncSession, rows: list[OutboxMessage], outcomes: list[SendResult], *, owner: str
) -> None:
    """Store results, but only on rows still pending and still leased to `owner`:
    a row cancelled meanwhile (unsubscribed) stays cancelled, and a row another
    replica took over is left to it (it checks Slack before posting again)."""
    groups: dict[State, list[dict[str, Any]]] = defaultdict(list)
    for o in outcomes:
        error = o.error[:300] if o.error else None
        if o.state == State.SENT:
            groups[State.SENT].append(
                {"b_id": o.row_id, "state": State.SENT, "sent_ts": o.sent_ts, "last_error": None}
            )
        elif o.state == State.DEAD:
            groups[State.DEAD].append({"b_id": o.row_id, "state": State.DEAD, "last_error": error})
        elif o.state == State.PENDING:
            groups[State.PENDING].append(
                {
                    "b_id": o.row_id,
                    "state": State.PENDING,
                    "last_error": error,
                    "b_retry_in": float(o.retry_in or 1.0),
                }
            )
    table = OutboxMessage.__table__
    assert isinstance(table, Table)
    mine = and_(
        table.c.id == bindparam("b_id"),
        table.c.state == State.PENDING,
        table.c.lease_owner == owner,
    )
    extra: dict[State, dict[str, Any]] = {
        State.SENT: {"sent_at": db_now()},
        State.DEAD: {},
        State.PENDING: {"next_attempt_at": db_now(bindparam("b_retry_in", type_=Float()))},
    }
    for state, params in groups.items():
        columns = [k for k in params[0] if not k.startswith("b_")]
        await db.execute(
            update(table)
            .where(mine)
            .values(
                {c: bindparam(c) for c in columns}
                | extra[state]
                | {"lease_owner": None, "lease_until": None}
            ),
            params,
        )
    by_id = {r.id: r for r in rows}
    ended = [by_id[o.row_id].subscription_id for o in outcomes if o.end_subscription]
    if ended:
        await end_subscriptions(
            db, [i for i in ended if i is not None], reason="slack refused delivery"
        )
