"""The charts a poll's telling owes (pure): a final chart in the thread of each
subscription that was told its session ended (unless `chart=off`), and the
progress chart beside each stall alert told in a thread.

Derived from the rows the telling already decided on, so a chart goes exactly
where its message goes: a muted or filtered thread gets neither.
"""

from __future__ import annotations

from collections.abc import Container, Iterable

from bot.outbox.contract.payloads import ChartPayload, ProgressPayload, TransitionPayload
from bot.outbox.contract.rows import OutboxRow, Thread, chart_row


def chart_rows(
    rows: Iterable[OutboxRow],
    *,
    final_chart: Container[int],
    stall_minutes: dict[int, int | None],
) -> list[OutboxRow]:
    """`final_chart`: the subscriptions with `chart=end`; `stall_minutes`: each
    subscription's own stall threshold."""
    owed: list[OutboxRow] = []
    for row in rows:
        sub, thread_ts, session_id = row.subscription_id, row.thread_ts, row.session_id
        if sub is None or thread_ts is None or session_id is None:
            continue
        thread = Thread(sub, session_id, row.channel_id, thread_ts)
        payload = row.payload
        if isinstance(payload, TransitionPayload) and payload.ended and sub in final_chart:
            chart = ChartPayload(reason="end", session=payload.session)
            owed.append(chart_row(thread, chart))
        elif isinstance(payload, ProgressPayload) and payload.event == "stalled":
            chart = ChartPayload(
                reason="stall", session=payload.session, stall_minutes=stall_minutes.get(sub)
            )
            owed.append(chart_row(thread, chart, episode=payload.since.isoformat()))
    return owed
