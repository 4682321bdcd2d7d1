"""What a poll's results mean for the watch: the columns to write and the events
to tell. Pure: no database, no network, no clock but the times passed in, so
every rule here is checked without a process.

A session whose row comes back exactly as the last poll stored it (its
fingerprint, `bot.training.sessions.RawSession`) is not parsed, trimmed or compared
again: only what moves with time (its progress, its next poll) is written.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from bot.alerts.resource_reader import Read
from bot.alerts.spend import card_view_key
from bot.alerts.spend import stored as stored_spend
from bot.alerts.stall import ProgressCheck
from bot.alerts.stall import check as check_progress
from bot.poll.audience import SessionEvent
from bot.poll.pace import backoff
from bot.together.errors import TogetherError
from bot.training.poll_progress import PollProgress
from bot.training.sessions import RawSession, TrainingSession
from bot.training.snapshots import seen_state
from bot.training.status import short_status
from bot.training.time_bounds import later
from bot.training.transitions import checkpoint_news, checkpoints_beyond, detect, gone

if TYPE_CHECKING:
    from bot.poll.fetch import Fetched


class WatchedRow(Protocol):
    """What `observe` reads of a session's watch row."""

    @property
    def last_status(self) -> str: ...
    @property
    def transition_seq(self) -> int: ...
    @property
    def consecutive_failures(self) -> int: ...
    @property
    def checkpoint_keys(self) -> list[str] | None: ...
    @property
    def not_found_since(self) -> datetime | None: ...


class StoredWatchedRow(WatchedRow, Protocol):
    """What `judge` reads of a session's watch row: `observe`'s columns, and what
    tells a steady poll (nothing but time moved) from one to judge whole."""

    @property
    def progress(self) -> PollProgress | None: ...
    @property
    def active(self) -> bool: ...
    @property
    def write_failures(self) -> int: ...
    @property
    def last_failure(self) -> str | None: ...
    @property
    def fingerprint(self) -> str | None: ...


def observe(
    row: WatchedRow,
    fetched: TrainingSession | TogetherError,
    *,
    now: datetime,
    next_poll: datetime,
    confirm: timedelta,
    interval: float,
) -> tuple[dict[str, Any], list[SessionEvent]]:
    """What one poll result does to a session's watch: the columns to write and
    the events to tell, numbered on from `row.transition_seq`.

    A failure backs the session off; Together's own 404 is told as "gone" only
    once it has lasted `confirm`; a state is stored whole (`seen_state`) and
    its checkpoint news and status change become events."""
    if isinstance(fetched, TogetherError) and not fetched.sent:
        # Held back by a shared pause (another session's 429): ask again when it
        # ends; nothing went wrong with this session, so nothing is counted.
        wait = max(fetched.retry_after or 1.0, 1.0)
        return {"next_poll_at": later(now, wait)}, []
    if isinstance(fetched, TogetherError):
        failures = row.consecutive_failures + 1
        since = row.not_found_since
        if fetched.kind == "not_found" and since is not None and now - since >= confirm:
            # Together's own "no such session", again and again for a while: gone.
            seq = row.transition_seq + 1
            return {
                "transition_seq": seq,
                "active": False,
                "consecutive_failures": 0,
                "not_found_since": None,
                "last_failure": "gone (404)",
                "next_poll_at": next_poll,
            }, [SessionEvent(seq, None, transition=gone(row.last_status))]
        if fetched.kind == "not_found":
            # Not yet confirmed: look again next interval, tell nothing.
            return {
                "consecutive_failures": failures,
                "not_found_since": since or now,
                "last_failure": "not found (404); confirming",
                "next_poll_at": next_poll,
            }, []
        delay = backoff(failures, interval, fetched.retry_after)
        return {
            "consecutive_failures": failures,
            "not_found_since": None,
            "last_failure": str(fetched)[:300],
            "next_poll_at": later(now, delay),
        }, []
    session = fetched
    seq = row.transition_seq
    found: list[SessionEvent] = []
    news = checkpoint_news(row.checkpoint_keys, session)
    if news:
        seq += 1
        more = checkpoints_beyond(row.checkpoint_keys, session)
        found.append(SessionEvent(seq, session, checkpoints=news, more_checkpoints=more))
    change = detect(row.last_status, session)
    if change is not None:
        seq += 1
        found.append(SessionEvent(seq, session, transition=change))
    return seen_state(session) | {
        "transition_seq": seq,
        "consecutive_failures": 0,
        "not_found_since": None,
        "last_failure": None,
        "next_poll_at": next_poll,
        "active": not session.terminal,
    }, found


@dataclass
class Judgement:
    """A batch's polls judged: the columns to write per session (in the order
    judged) and the events to tell per session (only those with any)."""

    updates: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: dict[str, list[SessionEvent]] = field(default_factory=dict)

    def ended(self) -> list[str]:
        """The sessions whose training ended with this poll."""
        return [
            sid
            for sid, found in self.events.items()
            if any(e.transition is not None and e.transition.ended for e in found)
        ]

    def to_status(self) -> dict[str, int]:
        """How many sessions changed to each status."""
        counts: dict[str, int] = defaultdict(int)
        for found in self.events.values():
            for e in found:
                if e.transition is not None:
                    counts[short_status(e.transition.new_status)] += 1
        return dict(counts)


def judge(
    rows: Mapping[str, StoredWatchedRow],
    outcomes: Mapping[str, Fetched],
    *,
    now: datetime,
    next_poll: datetime,
    confirm: timedelta,
    interval: float,
    stall_after: timedelta | None,
    reads: Mapping[str, Read] | None = None,
) -> Judgement:
    """Judge each poll of `outcomes` against its stored watch in `rows` (the
    sessions to write: those not in `rows` are left out). `reads` are the model
    resources the spend watch read this cycle, by session."""
    judged = Judgement()
    for session_id, row in rows.items():
        fetched = outcomes[session_id]
        read = (reads or {}).get(session_id)
        fingerprint = None
        if isinstance(fetched, RawSession):
            fingerprint = fetched.fingerprint
            steady = _steady(row, fetched, now=now, stall_after=stall_after, read=read)
            if steady is not None:
                # The row as the last poll stored it: only what moves with time.
                judged.updates[session_id] = {
                    "last_polled_at": now,
                    "next_poll_at": next_poll,
                    "progress": steady,
                }
                continue
            try:
                fetched = fetched.session()
            except ValueError:  # its head parsed, so this is not expected: not told
                fetched = TogetherError("bad_response", "invalid fields")
        values, found = observe(
            row,
            fetched,
            now=now,
            next_poll=next_poll,
            confirm=confirm,
            interval=interval,
        )
        if isinstance(fetched, TrainingSession):  # the step as this poll saw it
            kept, progress, key = _poll_progress(
                row, fetched, now=now, stall_after=stall_after, read=read
            )
            values["progress"] = kept
            if progress is not None:
                found.append(SessionEvent(values["transition_seq"], fetched, progress=progress))
            # the card is redrawn when what it shows changes: the resource, steps/min
            if key is not None and not fetched.terminal:
                found.append(
                    SessionEvent(
                        values["transition_seq"], fetched, card_progress=kept, card_view_key=key
                    )
                )
            # the row this state was built from; a later poll of the same row is steady
            values["fingerprint"] = fingerprint
        judged.updates[session_id] = {"last_polled_at": now, "write_failures": 0} | values
        if found:
            judged.events[session_id] = found
    return judged


def _steady(
    row: StoredWatchedRow,
    fetched: RawSession,
    *,
    now: datetime,
    stall_after: timedelta | None,
    read: Read | None,
) -> PollProgress | None:
    """The progress column to write when this poll changes nothing else, or None
    when it may (then the row is parsed and judged whole).

    Nothing else changes when the row is the one the stored state was built from
    (same fingerprint), the watch is live with no failure to clear, and neither
    the stall watch nor the spend watch owes a message: the status, checkpoints
    and snapshot are then those stored, so no transition or checkpoint is news.
    The progress is judged from the head, which has what it reads."""
    if not (
        row.fingerprint is not None
        and row.fingerprint == fetched.fingerprint
        and row.active
        and row.consecutive_failures == 0
        and row.not_found_since is None
        and row.write_failures == 0
        and row.last_failure is None
        and not fetched.head.terminal
    ):
        return None
    progress, check, key = _poll_progress(
        row, fetched.head, now=now, stall_after=stall_after, read=read
    )
    return progress if check is None and key is None else None


def _poll_progress(
    row: StoredWatchedRow,
    session: TrainingSession,
    *,
    now: datetime,
    stall_after: timedelta | None,
    read: Read | None,
) -> tuple[PollProgress, ProgressCheck | None, str | None]:
    """The progress column after this poll (the step as seen, the spend watch's
    read, the redraws so far), the stall watch's check when it may owe a message,
    and the key of this redraw of the card when what it shows of the watch changed
    (None: it did not): numbered, so each change is its own redraw."""
    old = row.progress or PollProgress()
    progress, check = check_progress(old, session, now=now, stall_after=stall_after)
    if read is not None:  # the spend watch's read this cycle replaces its last one
        progress = progress.model_copy(update={"spend": stored_spend(old.spend, read, now=now)})
    key = card_view_key(progress)
    if key is None or key == card_view_key(old):
        return progress.model_copy(update={"redraws": old.redraws}), check, None
    redraws = old.redraws + 1
    return progress.model_copy(update={"redraws": redraws}), check, f"{redraws}:{key}"
