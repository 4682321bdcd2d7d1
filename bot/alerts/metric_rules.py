"""The rule watch: a channel's metric rules judged on each reading the bot
already makes (the W&B read for the card, the poll for `steps_per_min`), and
the rows a crossing owes written in the same transaction as the rules' state.

No reading is fetched for a rule: the W&B read asks for the rules' metrics in
the request it makes anyway, and `steps_per_min` is the polls' own measure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.outbox.contract.payloads import RulePayload
from bot.outbox.contract.rows import OutboxRow, Thread
from bot.outbox.contract.rule_rows import rule_rows
from bot.outbox.queue import insert_outbox
from bot.store.queries.metric_rules import rule_states, rules_reaching, write_rule_states
from bot.store.queries.watch_state import snapshots as stored_snapshots
from bot.store.session import Db
from bot.training.poll_progress import PollProgress
from bot.training.snapshots import SessionSnapshot
from bot.training.thresholds import (
    OPS,
    STEPS_PER_MIN,
    Op,
    RuleState,
    crossing_began,
    judge_reading,
)
from bot.training.time_bounds import later

#: W&B's `_timestamp` counts from here (naive UTC, as the database's times)
EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True)
class Reading:
    """One metric's value as just read (None: missing), and the step it was read at.

    A W&B read also carries the recent points as the run logged them (`points`:
    Unix time and value) and when the session was read before (`floor`): a new
    crossing is timed from the first of its points, never before that earlier
    read (which saw no crossing, or was made before the rule), nor after now."""

    value: float | None
    step: float | None = None
    points: tuple[tuple[float, float], ...] = ()
    floor: datetime | None = None

    def began(self, *, op: Op, threshold: float, now: datetime) -> datetime | None:
        """When the crossing this reading is in began, as far as it knows (None: now)."""
        if not self.points or self.floor is None:
            return None
        at = crossing_began(self.points, op=op, threshold=threshold)
        if at is None:
            return None
        return max(self.floor, min(later(EPOCH, at), now))


def poll_readings(updates: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Reading]]:
    """`steps_per_min` of each session a poll wrote a step view for (pure): the
    measured rate, which only moves when the step does, capped by how long the
    step has stood still, so a slowdown reads as one before the next step."""
    out: dict[str, dict[str, Reading]] = {}
    for session_id, values in updates.items():
        if "progress" not in values:
            continue
        progress: PollProgress = values["progress"]
        if not progress.running or progress.rate is None:
            continue
        rate = progress.rate
        if progress.since is not None and progress.seen_at is not None:
            # a step standing still for t minutes allows at most one step in t
            still = (progress.seen_at - progress.since).total_seconds() / 60
            if still > 0:
                rate = min(rate, 1 / still)
        step = float(progress.step) if progress.step is not None else None
        out[session_id] = {STEPS_PER_MIN: Reading(rate, step)}
    return out


async def judge_rules(
    db: Db,
    readings: Mapping[str, Mapping[str, Reading]],
    *,
    now: datetime,
    oncall_channel: str | None,
    snapshots: Mapping[str, SessionSnapshot | None] | None = None,
) -> int:
    """Judge every rule reaching these readings; returns the outbox rows written.
    Statements do not grow with the rules: one read of the rules, one of their
    state, one snapshot read when something fires, one state write, one insert."""
    if not readings:
        return 0
    metrics = {name for found in readings.values() for name in found}
    reaching = await rules_reaching(db, list(readings), metrics=metrics)
    if not reaching:
        return 0
    states = await rule_states(db, {(at.rule.id, at.session_id) for at in reaching})
    changed: dict[tuple[int, str], RuleState] = {}
    fired: list[tuple[Any, Reading, Any]] = []
    for at in reaching:
        reading = readings[at.session_id].get(at.rule.metric)
        op = at.rule.op
        if reading is None or op not in OPS:
            continue
        key = (at.rule.id, at.session_id)
        old = states.get(key, RuleState())
        new, fire = judge_reading(
            old,
            op=_op(op),
            threshold=at.rule.threshold,
            value=reading.value,
            now=now,
            hold=timedelta(seconds=at.rule.hold_seconds),
            began=reading.began(op=_op(op), threshold=at.rule.threshold, now=now),
        )
        if new != old:
            changed[key] = new
        if fire is not None:
            fired.append((at, reading, fire))
    rows: list[OutboxRow] = []
    if fired:
        known = dict(snapshots or {})
        missing = [at.session_id for at, _, _ in fired if at.session_id not in known]
        if missing:
            known |= await stored_snapshots(db, missing)
        for at, reading, fire in fired:
            snapshot = known.get(at.session_id)
            payload = RulePayload(
                metric=at.rule.metric,
                op=at.rule.op,
                threshold=at.rule.threshold,
                hold_seconds=at.rule.hold_seconds,
                value=reading.value,
                step=reading.step,
                since=fire.since,
                held_seconds=fire.held.total_seconds(),
                session=snapshot,
                page=at.rule.page,
            )
            muted = at.muted_until is not None and at.muted_until > now
            thread = Thread(at.subscription_id, at.session_id, at.channel_id, at.root_ts)
            rows += rule_rows(
                payload,
                rule_id=at.rule.id,
                thread=thread,
                muted=muted,
                oncall_channel=oncall_channel,
            )
    await write_rule_states(db, changed)
    await insert_outbox(db, rows)
    return len(rows)


def _op(text: str) -> Op:
    for op in OPS:
        if op == text:
            return op
    raise ValueError(text)
