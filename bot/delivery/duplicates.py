"""Whether Slack already has a row's message: what lets a retry after a crash
not post the same news twice.

Each message carries its row's dedupe key in its metadata (`METADATA_EVENT`);
a row on a later attempt looks for that key in the thread (or, for a row
without a thread, the channel's history since the row was written).
"""

from __future__ import annotations

import logging
from datetime import UTC

from bot.outbox.contract.payloads import Kind
from bot.outbox.table import OutboxMessage
from bot.slack_web import SlackApiError, SlackWeb
from bot.slack_web.refusals import PERMANENT_ERRORS, error_of, status_of

log = logging.getLogger(__name__)

METADATA_EVENT = "rl_bot_notification"
# The duplicate check reads at most this many pages of a thread (1,000 replies each).
MAX_CHECK_PAGES = 10


class CannotCheck(Exception):
    """Slack could not tell whether it already has a message (any reason)."""


async def already_posted(slack: SlackWeb, row: OutboxMessage) -> str | None:
    """The ts of a message carrying this row's dedupe key, if Slack has one.

    Any failure to check (no history scope, an error, an answer of an odd shape)
    means "cannot check": post, which risks a repeat but never a loss. Only a
    channel Slack says is gone for good is raised, to end the subscription; a
    row addressed to a person's id is not (any DM: Slack may not list a user
    id's history, which says nothing about the DM itself)."""
    try:
        return await _find_posted(slack, row)
    except SlackApiError as exc:
        error = error_of(exc)
        if error in PERMANENT_ERRORS and not addressed_to_person(row):
            raise
        reason = error or f"HTTP {status_of(exc)}"
    except Exception as exc:
        reason = type(exc).__name__
    log.warning(
        "cannot check Slack for an earlier post (%s); posting",
        str(reason)[:100],
        extra={"outbox_id": row.id},
    )
    return None


#: the rows that go to a person's id rather than a channel
_PERSONAL_KINDS = frozenset({Kind.DM, Kind.CREATOR_DM})


def addressed_to_person(row: OutboxMessage) -> bool:
    """Whether a row is posted to a user id (a DM Slack opens on the post), not to a
    channel: its kind says so, or its address is a user's (U… or W…). Pure."""
    return row.kind in _PERSONAL_KINDS or row.channel_id[:1] in ("U", "W")


async def _find_posted(slack: SlackWeb, row: OutboxMessage) -> str | None:
    cursor: str | None = None
    for _ in range(MAX_CHECK_PAGES):
        if row.thread_ts:
            response = await slack.thread_replies(
                channel=row.channel_id,
                ts=row.thread_ts,
                include_all_metadata=True,
                limit=1000,
                cursor=cursor,
            )
        else:
            # Stored times are naive UTC: say so, or .timestamp() reads them as local time.
            created = row.created_at.replace(tzinfo=UTC).timestamp() if row.created_at else 60.0
            response = await slack.history(
                channel=row.channel_id,
                oldest=f"{created - 60:.6f}",
                include_all_metadata=True,
                limit=1000,
                cursor=cursor,
            )
        messages = response.get("messages")
        if not isinstance(messages, list):
            raise CannotCheck("no list of messages")
        for message in messages:
            if _carries(message, row.dedupe_key):
                return str(message["ts"])
        meta = response.get("response_metadata")
        cursor = meta.get("next_cursor") if isinstance(meta, dict) else None
        if not cursor or not isinstance(cursor, str):
            return None
    raise CannotCheck(f"more than {MAX_CHECK_PAGES} pages")


def _carries(message: object, dedupe_key: str) -> bool:
    """Whether a listed message is one of ours with this dedupe key."""
    if not isinstance(message, dict) or not isinstance(message.get("metadata"), dict):
        return False
    metadata = message["metadata"]
    payload = metadata.get("event_payload")
    return (
        metadata.get("event_type") == METADATA_EVENT
        and isinstance(payload, dict)
        and payload.get("dedupe_key") == dedupe_key
    )
