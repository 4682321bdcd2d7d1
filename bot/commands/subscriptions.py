"""Subscribing a channel to a session, and ending subscriptions.

Services take the database session as the keyword `db` and leave the
transaction to the caller, except `subscribe`, which calls Slack between two
short transactions of its own: no transaction is ever open across a Slack or
Together call. Those calls happen before anything is stored, so a failure
stores nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot import rendering
from bot.commands.parser import DEFAULT_FILTERS
from bot.outbox.queue import end_subscriptions
from bot.slack_web import SlackApiError, SlackWeb
from bot.store.queries.subscriptions import active_subscription, subscription_row
from bot.store.queries.watched_sessions import start_watching
from bot.store.tables import Subscription, utcnow
from bot.together.client import TogetherClient
from bot.training.sessions import TrainingSession

log = logging.getLogger(__name__)

#: writes a thread's options (`stall=`, `dm=` …) given the subscription's id, inside
#: the transaction that stores the subscription
Configure = Callable[[AsyncSession, int], Awaitable[None]]

SLACK_CHANNEL_PROBLEMS = {
    "not_in_channel": "I am not in this channel. Invite me with `/invite @rl-bot`, then try again.",
    "channel_not_found": "I cannot see this channel. Invite me with `/invite @rl-bot`, then try again.",
    "is_archived": "This channel is archived, so I cannot post here.",
    "channel_is_archived": "This channel is archived, so I cannot post here.",
    "restricted_action": "This workspace does not let me post in this channel.",
}
DM_PROBLEM = "Subscriptions live in channels, not direct messages. Run this in a channel."


class SubscriptionError(Exception):
    """A problem to tell the user, already worded for them."""


class _SubscribedMeanwhile(Exception):
    """The ended subscription we meant to revive was revived by someone else."""


@dataclass(frozen=True)
class Subscribed:
    subscription_id: int
    root_ts: str
    already: bool
    filters: frozenset[str] = DEFAULT_FILTERS
    filters_changed: bool = False


def filters_text(filters: frozenset[str]) -> str:
    return ",".join(sorted(filters)) or "status"


def slack_problem(exc: SlackApiError) -> str:
    error = str(exc.response.get("error") or "")
    return SLACK_CHANNEL_PROBLEMS.get(error, f"Slack refused the message (`{error or 'error'}`).")


async def subscribe(
    *,
    sessionmaker: async_sessionmaker[AsyncSession],
    slack: SlackWeb,
    session: TrainingSession,
    team_id: str,
    channel_id: str,
    user_id: str,
    first_poll_in: float,
    root_ts: str | None = None,
    filters: frozenset[str] | None = None,
    configure: Configure | None = None,
) -> Subscribed:
    """Post (or adopt) the root card, then store the subscription and its watch.
    `configure` writes the thread's options in the same transaction as the row,
    so nobody reads a new subscription without them.

    Subscribing again is idempotent, and is how a channel changes its filters
    (`filters=None`, as from a button, keeps the channel's). No transaction is
    open while Slack is called: the lookup and the store are two short ones, and
    a replica that stored the same subscription in between is caught by the
    unique key."""
    if channel_id.startswith("D"):
        raise SubscriptionError(DM_PROBLEM)
    async with sessionmaker() as db, db.begin():
        existing = await subscription_row(db, team_id, channel_id, session.id)
        if existing is not None and existing.active:
            wanted = existing.filter_set if filters is None else filters
            changed = existing.filter_set != wanted
            if changed:
                existing.filters = filters_text(wanted)
            if configure is not None:
                await configure(db, existing.id)
            return Subscribed(
                existing.id, existing.root_ts, already=True, filters=wanted, filters_changed=changed
            )
    if session.terminal:
        raise SubscriptionError(
            f"This session is already {rendering.status_words(session.status).lower()}; "
            "nothing more will change, so there is nothing to subscribe to."
        )
    wanted = DEFAULT_FILTERS if filters is None else filters
    card = rendering.card(session, subscribed=True)
    root = await _root_message(slack, channel_id, card, root_ts)
    try:
        async with sessionmaker() as db, db.begin():
            sub_id = await _store(
                db,
                team_id=team_id,
                channel_id=channel_id,
                session_id=session.id,
                root=root,
                user_id=user_id,
                filters=wanted,
            )
            await start_watching(db, session, first_poll_in=first_poll_in)
            if configure is not None:
                await configure(db, sub_id)
    except (IntegrityError, _SubscribedMeanwhile) as exc:
        # Another replica (or a double click) stored the same subscription while
        # we posted: keep its root, take back ours (unless we adopted the clicked card).
        await _take_back(slack, channel_id, root, root_ts)
        raise SubscriptionError(
            "This channel was subscribed to this session a moment ago; updates go in its thread."
        ) from exc
    except Exception:
        # Nothing was stored (the database refused the row or went away): a card
        # left up would be a subscription nobody keeps, and a retry would post another.
        await _take_back(slack, channel_id, root, root_ts)
        raise
    return Subscribed(sub_id, root, already=False, filters=wanted)


async def _take_back(slack: SlackWeb, channel_id: str, root: str, root_ts: str | None) -> None:
    """Delete the root card this attempt posted (not the clicked card it adopted)."""
    if root != root_ts:
        with contextlib.suppress(SlackApiError, OSError, TimeoutError):
            await slack.delete(channel=channel_id, ts=root)


async def _store(
    db: AsyncSession,
    *,
    team_id: str,
    channel_id: str,
    session_id: str,
    root: str,
    user_id: str,
    filters: frozenset[str],
) -> int:
    """Insert the subscription, or revive an ended one. Another replica doing the
    same shows as IntegrityError (insert) or `_SubscribedMeanwhile` (revive)."""
    now = utcnow()
    row = await subscription_row(db, team_id, channel_id, session_id)
    if row is None:
        row = Subscription(
            team_id=team_id,
            channel_id=channel_id,
            session_id=session_id,
            root_ts=root,
            subscribed_by=user_id,
            created_at=now,
            active=True,
            filters=filters_text(filters),
        )
        db.add(row)
    elif row.active:
        raise _SubscribedMeanwhile
    else:
        row.root_ts, row.subscribed_by, row.created_at = root, user_id, now
        row.active, row.ended_at, row.ended_reason = True, None, None
        row.filters, row.muted_until = filters_text(filters), None
    await db.flush()  # before watch(): its statements would autoflush this insert
    return row.id


async def _root_message(
    slack: SlackWeb, channel_id: str, card: rendering.Message, root_ts: str | None
) -> str:
    try:
        if root_ts:
            try:
                await slack.update(
                    channel=channel_id, ts=root_ts, text=card["text"], blocks=card["blocks"]
                )
                return root_ts
            except SlackApiError as exc:
                if exc.response.get("error") in SLACK_CHANNEL_PROBLEMS:
                    raise
                log.info(
                    "cannot adopt the clicked card as root (%s); posting a new one",
                    exc.response.get("error"),
                )
        response = await slack.post(
            channel=channel_id,
            text=card["text"],
            blocks=card["blocks"],
            unfurl_links=False,
            unfurl_media=False,
        )
        return str(response["ts"])
    except SlackApiError as exc:
        raise SubscriptionError(slack_problem(exc)) from exc


async def unsubscribe(
    *, db: AsyncSession, team_id: str, channel_id: str, session_id: str, user_id: str
) -> Subscription | None:
    sub = await active_subscription(
        db, team_id=team_id, channel_id=channel_id, session_id=session_id
    )
    if sub is not None:
        await end_subscriptions(db, [sub.id], reason=f"unsubscribed by {user_id}")
    return sub


async def fetch_for_user(together: TogetherClient, session_id: str) -> TrainingSession:
    """A user is waiting: retry transient failures a little, within seconds."""
    return await together.get_session(session_id, retries=2, backoff=0.5, max_wait=5.0)
