"""The personal DMs a poll's events owe: each person whose App Home switch took
a session hears of its error, its end and its stall, in a direct message.

Pure, like `audience`: events, the people listening and the time in, rows out.
The stall is judged by the same rule as a thread's (`alerts.stall.rows`) at the
bot's own threshold (STALL_AFTER_MINUTES), and told once per stall episode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from bot.alerts.stall import StallSettings
from bot.alerts.stall import rows as stall_rows
from bot.outbox.contract.payloads import ProgressPayload, TransitionPayload
from bot.outbox.contract.rows import OutboxRow, Thread, dm_row
from bot.poll.audience import SessionEvent
from bot.training.snapshots import SessionSnapshot


def personal_rows(
    events: Mapping[str, Sequence[SessionEvent]],
    listeners: Mapping[str, Sequence[str]],
    *,
    now: datetime,
    stored_snapshots: Mapping[str, SessionSnapshot | None] | None = None,
    stall: StallSettings | None = None,
) -> list[OutboxRow]:
    """One DM per (person, error or end or stall) among `events`; `listeners` are
    the people per session (`store.queries.personal_alerts.listeners`)."""
    out: list[OutboxRow] = []
    stored = stored_snapshots or {}
    # the thread's rule alone: no on-call page, no slow-start notice in a DM
    stall = replace(stall, oncall_channel=None, creating_after=None) if stall else None
    for session_id, found in events.items():
        people = listeners.get(session_id) or ()
        if not people:
            continue
        for event in found:
            session = event.session
            transition = event.transition
            if transition is not None and (transition.ended or transition.is_error):
                snapshot = SessionSnapshot.of(session) if session else stored.get(session_id)
                about = TransitionPayload(
                    old_status=transition.old_status,
                    new_status=transition.new_status,
                    ended=transition.ended,
                    gone=transition.gone,
                    session=snapshot,
                )
                out += [
                    dm_row(user, session_id, about, occurrence=f"{session_id}:{event.seq}")
                    for user in people
                ]
            elif event.progress is not None and stall is not None and session is not None:
                for row in stall_rows(
                    event.progress,
                    session,
                    [(Thread(0, session_id, "", ""), None, False)],
                    now=now,
                    settings=stall,
                ):
                    payload = row.payload
                    if isinstance(payload, ProgressPayload) and payload.event == "stalled":
                        occurrence = f"stalled:{session_id}:{payload.since.isoformat()}"
                        out += [
                            dm_row(user, session_id, payload, occurrence=occurrence)
                            for user in people
                        ]
    return out
