"""The message a row posts, in two steps: `look_up` asks Slack and Together for
what the message is better with (permalinks to the threads an alert links, a slow
start's place in the GPU queue, when Together gives it), then `render` draws it
from the row and what was found, with no I/O."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import aiohttp

from bot import rendering
from bot.delivery.deps import Posting
from bot.outbox.contract.payloads import (
    BudgetPayload,
    CardPayload,
    ChartPayload,
    CheckpointsPayload,
    CreatorDmPayload,
    DigestPayload,
    DmPayload,
    IdlePayload,
    MetricPayload,
    OncallPayload,
    OperatorPayload,
    Payload,
    ProgressPayload,
    RenderedDigest,
    RepagePayload,
    RootPayload,
    RulePayload,
    TransitionPayload,
)
from bot.outbox.table import OutboxMessage
from bot.rendering import actions as rendering_actions
from bot.rendering import watch as rendering_watch
from bot.rendering.actions import with_actions
from bot.rendering.follow import personal_heading
from bot.rendering.metric_alert import metric_alert
from bot.rendering.rules import RuleWords, budget_alert, rule_alert
from bot.rendering.words import session_label
from bot.settings.model import Settings
from bot.slack_web import SlackApiError, SlackWeb
from bot.store.tables import utcnow
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.training.resources import CostEstimate, ModelResource
from bot.training.sessions import TrainingSession, is_session_id
from bot.training.snapshots import SessionSnapshot
from bot.training.status import ResourceStatus

log = logging.getLogger(__name__)


def session_of(snapshot: TrainingSession | None, row: OutboxMessage) -> TrainingSession:
    """The session a row speaks of (very old rows carry none: only its id is known)."""
    if snapshot is not None:
        return snapshot
    return TrainingSession(id=row.session_id or "unknown", status="")


@dataclass(frozen=True)
class LookedUp:
    """What a row's message is better with, found before it is drawn."""

    #: the permalink of each thread the message links (None: Slack gave none)
    permalinks: dict[tuple[str, str], str | None] = field(default_factory=dict)
    #: the model resource of a slow start (its place in the GPU queue)
    resource: ModelResource | None = None
    now: datetime = field(default_factory=utcnow)

    def link(self, channel: str | None, ts: str | None) -> str | None:
        return self.permalinks.get((channel, ts)) if channel and ts else None


async def render_row(row: OutboxMessage, posting: Posting) -> rendering.Message:
    """The message a row posts: what it links looked up, then drawn."""
    looked = await look_up(row, slack=posting.slack, together=posting.together)
    return render(row, looked, settings=posting.settings)


async def look_up(
    row: OutboxMessage, *, slack: SlackWeb, together: TogetherClient | None
) -> LookedUp:
    """Ask Slack for the permalinks the row's message links and Together for a slow
    start's resource; what cannot be had is left out (the message goes without)."""
    payload = row.typed_payload
    permalinks: dict[tuple[str, str], str | None] = {}
    for channel, ts in _linked_threads(payload):
        permalinks[(channel, ts)] = await _permalink(slack, channel, ts, row)
    resource = None
    resource_id = _slow_start_resource(payload, row)
    if together is not None and resource_id:
        try:  # its place in the GPU queue, when Together gives one
            resource = await together.get_model_resource(resource_id)
        except TogetherError as exc:
            log.info("no model resource for a slow start: %s", exc, extra={"outbox_id": row.id})
    return LookedUp(permalinks=permalinks, resource=resource)


def _linked_threads(payload: Payload) -> list[tuple[str, str]]:
    """The threads a message of this payload links: an on-call page's (and a paged
    alert's) first thread; a creator's DM, the thread it came from."""
    match payload:
        case CreatorDmPayload() as p:
            own = [(p.thread_channel, p.thread_ts)] if p.thread_channel and p.thread_ts else []
            return _linked_threads(p.event) + own
        case DmPayload() as p:
            return _linked_threads(p.about)
        case OncallPayload() as p if p.thread_channel and p.thread_ts:
            return [(p.thread_channel, p.thread_ts)]
        case MetricPayload() | RulePayload() | BudgetPayload() as p if (
            p.page and p.thread_channel and p.thread_ts
        ):
            return [(p.thread_channel, p.thread_ts)]
        case ProgressPayload() as p if (
            p.event not in ("resumed", "creating") and p.page and p.thread_channel and p.thread_ts
        ):
            return [(p.thread_channel, p.thread_ts)]
    return []


def _slow_start_resource(payload: Payload, row: OutboxMessage) -> str | None:
    match payload:
        case CreatorDmPayload() as p:
            return _slow_start_resource(p.event, row)
        case DmPayload() as p:
            return _slow_start_resource(p.about, row)
        case ProgressPayload(event="creating") as p:
            return session_of(p.session, row).model_resources_id or None
    return None


def render(row: OutboxMessage, looked: LookedUp, *, settings: Settings) -> rendering.Message:
    """The message a row posts; a root row posts none (it only edits the root card).
    On-call's pages carry Acknowledge (naming this row), and stall and idle
    alerts Keep alive 1 h."""
    payload = row.typed_payload
    match payload:
        case CreatorDmPayload() as p:
            inner = _render(p.event, row, looked, settings=settings)
            return rendering_actions.creator_dm(
                with_actions(inner, action_buttons(p.event, alert_id=None)),
                permalink=looked.link(p.thread_channel, p.thread_ts),
            )
        case DmPayload() as p:  # what the thread says, headed as the person's own
            inner = _render(p.about, row, looked, settings=settings)
            return personal_heading(
                with_actions(inner, action_buttons(p.about, alert_id=None)),
                name=session_of(_snapshot_of(p), row).name,
            )
        case RepagePayload() as p:
            return rendering_actions.repage_message(
                p.minutes, p.what, mention=settings.oncall_mention
            )
    message = _render(payload, row, looked, settings=settings)
    return with_actions(message, action_buttons(payload, alert_id=row.id))


def action_buttons(payload: Payload, *, alert_id: int | None) -> list[dict[str, Any]]:
    """The buttons a row's message carries besides its own: Acknowledge on an
    on-call page (`alert_id` names it), Keep alive 1 h on a stall or idle alert
    whose resource may be kept up."""
    page = isinstance(payload, OncallPayload) or (
        isinstance(payload, ProgressPayload | IdlePayload | RulePayload | BudgetPayload)
        and payload.page
    )
    out = [rendering_actions.ack_button(alert_id)] if page and alert_id is not None else []
    if isinstance(payload, BudgetPayload) and payload.page and payload.resource_id:
        if is_session_id(payload.resource_id):  # the same id alphabet
            out.append(rendering_watch.stop_resource_button(payload.resource_id))
            out.append(rendering_actions.keep_alive_button(payload.resource_id))
        return out
    resource_id = None
    if isinstance(payload, ProgressPayload) and payload.event == "stalled" and payload.session:
        resource_id = payload.session.model_resources_id or ""
    elif isinstance(payload, IdlePayload):
        resource = payload.resource
        if resource.status_enum is ResourceStatus.READY:
            resource_id = resource.id
    if resource_id and is_session_id(resource_id):  # the same id alphabet
        out.append(rendering_actions.keep_alive_button(resource_id))
    return out


def _render(
    payload: Payload, row: OutboxMessage, looked: LookedUp, *, settings: Settings
) -> rendering.Message:
    match payload:
        case TransitionPayload() as p:
            session = (
                session_of(p.session, row)
                if p.session is not None
                else TrainingSession(id=row.session_id or "unknown", status=p.old_status)
            )
            return rendering.transition_message(
                session, p.old_status, p.new_status, ended=p.ended, gone=p.gone
            )
        case CheckpointsPayload() as p:
            return rendering.checkpoint_message(session_of(p.session, row), p.items, more=p.more)
        case DigestPayload(message=RenderedDigest() as stored):  # queued before digests were data
            if stored.text:
                return {"text": stored.text, "blocks": list(stored.blocks)}
            return rendering.notice("(empty digest)")
        case DigestPayload() as p:
            return rendering.digest_message(
                p.day,
                [rendering.SessionLine(s.session_id, s.display_name, s.status) for s in p.sessions],
                [rendering.StatusChange(c.name, c.old_status, c.new_status) for c in p.changes],
            )
        case OncallPayload() as p:
            return rendering.oncall_alert(
                session_of(p.session, row),
                permalink=looked.link(p.thread_channel, p.thread_ts),
                mention=settings.oncall_mention,
            )
        case OperatorPayload() as p:
            return rendering.operator_alert(p.title, p.detail, mention=settings.oncall_mention)
        case ProgressPayload() as p:
            return _progress_message(row, p, looked, settings=settings)
        case IdlePayload() as p:
            return rendering_watch.idle_resource_alert(
                p.resource,
                idle_since=p.idle_since,
                now=looked.now,
                sessions=list(p.sessions),
                price=CostEstimate(currency=p.currency or "USD", price_per_hour=p.price_per_hour)
                if p.price_per_hour is not None
                else None,
                mention=settings.oncall_mention if p.page else None,
            )
        case MetricPayload() as p:
            permalink = looked.link(p.thread_channel, p.thread_ts) if p.page else None
            return metric_alert(
                session_label(session_of(p.session, row)),
                p.metric,
                p.value,
                p.step,
                mention=settings.oncall_mention if p.page else None,
                permalink=permalink,
            )
        case RulePayload() as p:
            permalink = looked.link(p.thread_channel, p.thread_ts) if p.page else None
            return rule_alert(
                session_label(session_of(p.session, row)),
                RuleWords(
                    row.session_id or "", p.metric, p.op, p.threshold, p.hold_seconds, p.page
                ),
                value=p.value,
                step=p.step,
                held=timedelta(seconds=p.held_seconds),
                mention=settings.oncall_mention if p.page else None,
                permalink=permalink,
            )
        case BudgetPayload() as p:
            permalink = looked.link(p.thread_channel, p.thread_ts) if p.page else None
            what = "This channel's spend today"
            if not p.daily:
                what = session_label(session_of(p.session, row))
            return budget_alert(
                what,
                level=p.level,
                spent=p.spent,
                amount=p.amount,
                per_hour=p.per_hour,
                reaches_at=p.reaches_at,
                currency=p.currency,
                now=looked.now,
                others=p.others,
                mention=settings.oncall_mention if p.page else None,
                permalink=permalink,
            )
        case RootPayload() | CardPayload():
            raise ValueError("a root or card row posts no message")
        case ChartPayload():
            raise ValueError("a chart row uploads a file (bot.delivery.chart)")
        case _:
            raise ValueError(f"no message for a {payload.kind} payload here")


def _snapshot_of(p: DmPayload) -> SessionSnapshot | None:
    about = p.about
    if isinstance(about, IdlePayload):
        return about.sessions[0] if about.sessions else None
    return about.session


def _progress_message(
    row: OutboxMessage, p: ProgressPayload, looked: LookedUp, *, settings: Settings
) -> rendering.Message:
    """A stall (in the thread, or on-call's page with the thread linked), its end,
    or a slow start."""
    session = session_of(p.session, row)
    if p.event == "resumed":
        return rendering_watch.resumed_message(
            session, old_step=p.step, new_step=p.new_step, stalled_for=timedelta(seconds=p.seconds)
        )
    if p.event == "creating":
        return rendering_watch.creating_message(
            session, waited=timedelta(seconds=p.seconds), resource=looked.resource
        )
    return rendering_watch.stalled_message(
        session,
        step=p.step,
        since=p.since,
        stalled_for=timedelta(seconds=p.seconds),
        idles_out_at=p.idles_out_at,
        idles_out_estimated=p.idles_out_estimated,
        mention=settings.oncall_mention if p.page else None,
        permalink=looked.link(p.thread_channel, p.thread_ts) if p.page else None,
    )


async def _permalink(slack: SlackWeb, channel: str, ts: str, row: OutboxMessage) -> str | None:
    try:
        link = await slack.permalink(channel=channel, ts=ts)
    except (SlackApiError, aiohttp.ClientError, TimeoutError):
        log.warning("no permalink for an on-call alert", extra={"outbox_id": row.id})
        return None
    return str(link.get("permalink") or "") or None
