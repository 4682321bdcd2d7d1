"""A watched session's root card with its watch section.

Every redraw of a root card (a status change, checkpoints, a stall, a spend
update, a command's answer) goes through here, so none drops what another shows:
the stored watch state is read back once and drawn by `rendering.watch`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from bot.rendering.blocks import Message, context_block
from bot.rendering.chart_block import CardChart, chart_block, with_chart
from bot.rendering.metric_lines import MetricLine, with_metrics
from bot.rendering.watch import WatchFacts, with_watch
from bot.training.metrics_view import MetricsView
from bot.training.poll_progress import CardView
from bot.training.rules import eta, stalled_for
from bot.training.snapshots import SessionSnapshot


def facts(view: CardView) -> WatchFacts:
    """The card's watch facts from a `watched_sessions.progress` value (with a
    subscription's `target` and its `eta`, when the poller added them)."""
    spend = view.spend
    price = spend.cost() if spend is not None else None
    return WatchFacts(
        resource=spend.model_resource() if spend is not None else None,
        price=price,
        ready_seconds=spend.ready_seconds if spend is not None and price is not None else None,
        rate=view.rate,
        target=view.target,
        eta=view.eta,
        budget=view.budget,
    )


@dataclass(frozen=True)
class CardExtras:
    """What a subscription's root card shows beyond the session: the watch's
    view of it (`watched_sessions.progress`) and the subscription's own
    `target=` and stall threshold (None: no stall flag)."""

    progress: CardView
    target: int | None = None
    stall_after: timedelta | None = None
    #: the W&B line: the latest value and recent points of each watched metric
    metrics: tuple[MetricLine, ...] = ()
    #: the live chart (None: none yet, or the workspace refused the block)
    chart: CardChart | None = None
    #: the subscription's workspace, where a refusal of the chart is remembered
    team_id: str | None = None
    #: the session as last stored, and whether the subscription is still active: what
    #: a redraw that draws the newest state draws (None: nothing stored)
    stored: SessionSnapshot | None = None
    active: bool = True
    #: the thread's own settings the card shows: until when it is muted, and the
    #: channel's metric rules on the session (as `rendering.rules.rule_words`)
    muted_until: datetime | None = None
    rules: tuple[str, ...] = ()


def metric_lines(view: MetricsView, names: tuple[str, ...]) -> tuple[MetricLine, ...]:
    """The card's W&B line from the last read of the session's run (`session_metrics`)."""
    return tuple(
        MetricLine(
            name,
            view.latest.get(name),
            tuple(view.recent.get(name) or ()),
            bad=view.latest_bad.get(name),
        )
        for name in names
        if name in view.latest or view.recent.get(name)
    )


def card_chart(view: MetricsView) -> CardChart | None:
    """The card's chart from the last read kept in `session_metrics`."""
    chart = view.chart
    if chart is None:
        return None
    return CardChart(chart.kind, chart.name, tuple(chart.points))


def card_facts(extras: CardExtras, *, now: datetime) -> tuple[WatchFacts, int | None]:
    """The card's watch facts, and the step its stall flag names, from one
    watch state: every redraw of a root card (status change, checkpoints,
    stall, spend) renders from this, so none drops what another shows.

    The ETA is worked out at `now` from the measured rate and the target; the
    stall flag is up while a RUNNING session's step has not moved for
    `stall_after`."""
    base = facts(extras.progress)
    progress = extras.progress.progress()
    target = extras.target if extras.target is not None else base.target
    if progress is None:
        return replace(base, target=target), None
    frozen = stalled_for(progress, now)
    stalled = (
        progress.since
        if extras.stall_after is not None and frozen is not None and frozen >= extras.stall_after
        else None
    )
    when = eta(progress, target, now)
    return replace(base, target=target, eta=when, stalled_since=stalled), progress.step


def card_with_extras(card: Message, extras: CardExtras, *, now: datetime) -> Message:
    """A watched session's card with its watch section (see `card_facts`), its
    W&B line and its live chart."""
    shown, step = card_facts(extras, now=now)
    drawn = with_metrics(with_watch(card, shown, step=step), extras.metrics)
    drawn = _with_thread_line(drawn, extras, now=now)
    return with_chart(drawn, chart_block(extras.chart) if extras.chart is not None else None)


#: rules named on the card; the others are counted
_RULES_SHOWN = 3


def thread_line(extras: CardExtras, *, now: datetime) -> str | None:
    """`🔕 Muted until 14:05 UTC · 🔔 Alerts: `kl > 8`, …` (None: neither)."""
    parts: list[str] = []
    if extras.muted_until is not None and extras.muted_until > now.replace(tzinfo=None):
        until = extras.muted_until
        day = "" if until.date() == now.date() else f"{until:%b} {until.day}, "
        parts.append(f":no_bell: Muted until {day}{until:%H:%M} UTC")
    if extras.rules:
        shown = ", ".join(extras.rules[:_RULES_SHOWN])
        more = len(extras.rules) - _RULES_SHOWN
        parts.append(f":bell: Alerts: {shown}" + (f" and {more} more" if more > 0 else ""))
    return " · ".join(parts) or None


def _with_thread_line(card: Message, extras: CardExtras, *, now: datetime) -> Message:
    """The card with its thread line, above its buttons."""
    line = thread_line(extras, now=now)
    if line is None:
        return card
    blocks = list(card["blocks"])
    at = next((i for i, b in enumerate(blocks) if b.get("type") == "actions"), len(blocks))
    blocks.insert(at, context_block(line))
    return {**card, "blocks": blocks}
