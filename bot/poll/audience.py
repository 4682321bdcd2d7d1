"""Who hears what: the outbox rows a poll's events owe, by each subscription's
filters and mute, plus the on-call alerts.

Pure: events, subscriptions and the time in, rows out; the poller reads the
subscriptions and writes the rows, so every rule about telling lives here and
is tested without a process or a database.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from bot.alerts.stall import ProgressCheck, StallSettings
from bot.alerts.stall import rows as stall_rows
from bot.outbox.contract.rows import (
    OutboxRow,
    Thread,
    checkpoints_row,
    oncall_row,
    status_row,
    watch_row,
)
from bot.training.poll_progress import CardView, PollProgress
from bot.training.rules import eta
from bot.training.sessions import TrainingSession
from bot.training.snapshots import SessionSnapshot
from bot.training.transitions import CheckpointNews, Transition


@dataclass
class SessionEvent:
    """Something to tell about one session, numbered by its per-session sequence.

    `session` is None when Together no longer knows the session (gone): its
    stored snapshot stands in for it."""

    seq: int
    session: TrainingSession | None
    transition: Transition | None = None
    checkpoints: list[CheckpointNews] = field(default_factory=list)
    # New checkpoints older than the newest told in `checkpoints`: only counted.
    more_checkpoints: int = 0
    # The step as this poll saw it, when a stall, its end or a slow start may be owed.
    progress: ProgressCheck | None = None
    # The polls' progress (`watched_sessions.progress`) when the card is worth a redraw,
    # and the key of what it shows.
    card_progress: PollProgress | None = None
    card_view_key: str | None = None


class Subscriber(NamedTuple):
    """One active subscription, as far as telling is concerned."""

    id: int
    session_id: str
    channel_id: str
    root_ts: str
    filters: frozenset[str]
    muted_until: datetime | None = None
    stall_after_minutes: int | None = None  # `stall=`: 0 off, None the default
    target_step: int | None = None  # `target=`: the step the card gives an ETA for
    budget: float | None = None  # `budget <id> $…`: the card's "≈ $X of $Y"

    def muted(self, now: datetime) -> bool:
        return self.muted_until is not None and self.muted_until > now


@dataclass
class Notifications:
    """The rows a poll owes: thread rows, and on-call alerts (still to be checked
    against the alerts already sent)."""

    rows: list[OutboxRow] = field(default_factory=list)
    alerts: list[OutboxRow] = field(default_factory=list)


def tells(filters: frozenset[str], transition: Transition) -> bool:
    """Whether a subscription with these filters wants this status change told."""
    return "status" in filters or ("errors-only" in filters and transition.is_error)


def _card_view(
    progress: PollProgress, key: str, sub: Subscriber, now: datetime
) -> list[tuple[str, CardView]]:
    """What one subscription's card shows of the progress: the resource (spend
    watch) and, with its own `target=`, the target and ETA; nothing when neither."""
    budgeted = f":b{sub.budget:g}" if sub.budget is not None else ""
    if sub.target_step is None:
        shown = CardView.of(progress, budget=sub.budget)
        return [(key + budgeted, shown)] if progress.spend is not None else []
    steps = progress.progress()
    when = eta(steps, sub.target_step, now) if steps is not None else None
    shown = CardView.of(progress, target=sub.target_step, eta=when, budget=sub.budget)
    return [(f"{key}:t{sub.target_step}{budgeted}", shown)]


def notifications(
    events: Mapping[str, Sequence[SessionEvent]],
    watchers: Iterable[Subscriber],
    *,
    now: datetime,
    oncall_channel: str | None,
    stored_snapshots: Mapping[str, SessionSnapshot | None] | None = None,
    stall: StallSettings | None = None,
) -> Notifications:
    """One row per (subscription, event), chosen by its filters and mute.

    A status change a subscription does not want told (filtered or muted) still
    gets a `root` row, so its root card keeps showing the current state. An
    error also pages on-call once, linking the first subscription's thread.
    Watchers are taken in the order given (the first one's thread is linked)."""
    by_session: dict[str, list[Subscriber]] = defaultdict(list)
    for watcher in watchers:
        by_session[watcher.session_id].append(watcher)
    stored = stored_snapshots or {}
    out = Notifications()
    for session_id, found in events.items():
        subs = by_session.get(session_id, [])
        for event in found:
            session = event.session
            if event.card_progress is not None and event.card_view_key and session is not None:
                out.rows += [
                    watch_row(
                        Thread(sub.id, session_id, sub.channel_id, sub.root_ts),
                        key=key,
                        session=session,
                        view=view,
                    )
                    for sub in subs
                    for key, view in _card_view(event.card_progress, event.card_view_key, sub, now)
                ]
                continue
            if event.progress is not None:
                if stall is not None and session is not None:
                    threads = [
                        (
                            Thread(sub.id, session_id, sub.channel_id, sub.root_ts),
                            sub.stall_after_minutes,
                            sub.muted(now),
                        )
                        for sub in subs
                    ]
                    out.rows += stall_rows(
                        event.progress, session, threads, now=now, settings=stall
                    )
                continue
            snapshot = SessionSnapshot.of(session) if session else stored.get(session_id)
            for sub in subs:
                muted = sub.muted(now)
                thread = Thread(sub.id, session_id, sub.channel_id, sub.root_ts)
                if event.transition is not None:
                    told = tells(sub.filters, event.transition) and not muted
                    out.rows.append(
                        status_row(
                            thread,
                            seq=event.seq,
                            transition=event.transition,
                            snapshot=snapshot,
                            told=told,
                        )
                    )
                elif "checkpoints" in sub.filters and not muted:
                    out.rows.append(
                        checkpoints_row(
                            thread,
                            seq=event.seq,
                            items=event.checkpoints,
                            snapshot=snapshot,
                            more=event.more_checkpoints,
                        )
                    )
            if (
                event.transition is not None
                and event.transition.is_error
                and oncall_channel
                and session is not None
            ):
                first = subs[0] if subs else None
                out.alerts.append(
                    oncall_row(
                        oncall_channel,
                        session,
                        seq=event.seq,
                        thread_channel=first.channel_id if first else None,
                        thread_ts=first.root_ts if first else None,
                    )
                )
    return out
