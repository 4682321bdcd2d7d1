"""On-call's pages as outbox rows: which rows are pages (an error, a stall
page, an idle page: the rows sent to the on-call channel outside any thread),
and the ones nobody acknowledged within ONCALL_REPAGE_MINUTES, paged once more.

Every time is the database's clock (`db_now`).
"""

from __future__ import annotations

from sqlalchemy import String, cast, exists, literal, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from bot.outbox.contract.payloads import (
    BudgetPayload,
    IdlePayload,
    Kind,
    OncallPayload,
    ProgressPayload,
    RulePayload,
)
from bot.outbox.contract.rows import OutboxRow, State, repage_row
from bot.outbox.table import OutboxMessage
from bot.store.tables import AlertAck, db_now

#: kinds a page can be (a PROGRESS or IDLE row is one only outside a thread)
_PAGE_KINDS = (Kind.ONCALL, Kind.PROGRESS, Kind.IDLE, Kind.RULE, Kind.BUDGET)
#: a page older than the repage delay by more than this is not paged again (one
#: sent before ONCALL_REPAGE_MINUTES was set, or while the bot was down for long)
REPAGE_WINDOW_SECONDS = 3600.0
#: pages repaged in one run at most
REPAGE_BATCH = 50


def is_page(row: OutboxMessage) -> bool:
    """A row on-call is paged with: an error, or a stall or idle page."""
    payload = row.typed_payload
    if isinstance(payload, OncallPayload):
        return True
    return (
        isinstance(payload, ProgressPayload | IdlePayload | RulePayload | BudgetPayload)
        and payload.page
    )


async def page_row(db: AsyncSession, outbox_id: int) -> OutboxMessage | None:
    """The page with this id, if it is one (and is still kept)."""
    row = await db.get(OutboxMessage, outbox_id)
    return row if row is not None and is_page(row) else None


async def cancel_repage(db: AsyncSession, outbox_id: int) -> None:
    """A page just acknowledged is not paged again, even if its repage is queued."""
    await db.execute(
        update(OutboxMessage)
        .where(
            OutboxMessage.dedupe_key == f"repage:{outbox_id}",
            OutboxMessage.state == State.PENDING,
        )
        .values(state=State.CANCELLED)
        .execution_options(synchronize_session=False)
    )


def what_paged(row: OutboxMessage) -> str:
    """What a page was about, in plain words (rendering escapes them)."""
    payload = row.typed_payload
    if isinstance(payload, IdlePayload):
        return f"model resource {payload.resource.id or '(unknown)'} idle"
    session = getattr(payload, "session", None)
    name = (session.display_name or session.id) if session is not None else None
    name = name or row.session_id or "a session"
    if isinstance(payload, ProgressPayload):
        return f"training session {name} making no progress"
    if isinstance(payload, RulePayload):
        return f"training session {name}: {payload.metric} {payload.op} {payload.threshold:g}"
    if isinstance(payload, BudgetPayload):
        return f"a spend budget of {payload.amount:g} reached"
    return f"training session {name} entered Error"


async def unacknowledged(db: AsyncSession, *, channel: str, minutes: float) -> list[OutboxRow]:
    """The repages owed: pages in `channel` sent at least `minutes` ago (but not
    REPAGE_WINDOW_SECONDS longer), that nobody acknowledged and that were not
    paged again yet. Their dedupe key makes each repage once."""
    delay = minutes * 60.0
    repaged = aliased(OutboxMessage)
    key = literal("repage:", String()) + cast(OutboxMessage.id, String())
    found = await db.execute(
        select(OutboxMessage)
        .where(
            OutboxMessage.channel_id == channel,
            OutboxMessage.kind.in_(_PAGE_KINDS),
            OutboxMessage.subscription_id.is_(None),
            OutboxMessage.state == State.SENT,
            OutboxMessage.sent_ts.is_not(None),
            OutboxMessage.sent_at <= db_now(-delay),
            OutboxMessage.sent_at >= db_now(-(delay + REPAGE_WINDOW_SECONDS)),
            ~exists().where(AlertAck.outbox_id == OutboxMessage.id),
            ~exists().where(repaged.dedupe_key == key),
        )
        .order_by(OutboxMessage.id)
        .limit(REPAGE_BATCH)
    )
    return [
        repage_row(
            channel, alert_id=row.id, thread_ts=row.sent_ts, minutes=minutes, what=what_paged(row)
        )
        for row in found.scalars()
        if is_page(row)
    ]
