"""What Slack's refusals mean: one reading of its error strings and statuses.

Each caller decides what to do with a kind (delivery retries or kills a row, a
chart upload gives up, discovery switches a rule off), but what Slack said is
read here once. Pure.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from slack_sdk.errors import SlackApiError

#: a channel or thread gone for good for the bot: no retry will post there
PERMANENT_ERRORS = frozenset(
    {
        "channel_not_found",
        "is_archived",
        "channel_is_archived",
        "not_in_channel",
        "thread_not_found",
        "cannot_reply_to_message",
        "restricted_action",
        "access_denied",
        "team_access_not_granted",
        "is_inactive",
        "ekm_access_denied",
        # a direct message to a person who blocked the app or cannot be written to
        "cannot_dm_bot",
        "messages_tab_disabled",
        "user_not_found",
        "user_disabled",
    }
)
#: the bot's token is refused: no message gets through until it is fixed
AUTH_ERRORS = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "no_permission",
        "org_login_required",
    }
)
#: Slack's ways of refusing a DM to a person (they blocked the app, turned its
#: Messages tab off, left, or are not a person we can write to)
DM_REFUSALS = frozenset(
    {
        "cannot_dm_bot",
        "user_disabled",
        "user_not_found",
        "messages_tab_disabled",
        "not_allowed_token_type",
        "channel_not_found",
        "is_archived",
        "restricted_action",
        "access_denied",
    }
)
#: refusals of a file upload that no retry changes
UPLOAD_FINAL = frozenset(
    {
        "missing_scope",
        "not_in_channel",
        "channel_not_found",
        "is_archived",
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "restricted_action",
    }
)
#: Slack's own failures, told with HTTP 200 and `ok: false` (its common errors
#: "likely due to a transient issue on our end", "temporarily unavailable", a
#: workspace moving into an Enterprise organization): as passing as a 5xx
PASSING_ERRORS = frozenset(
    {
        "internal_error",
        "fatal_error",
        "service_unavailable",
        "request_timeout",
        "team_added_to_org",
    }
)
#: the bot can no longer post in a channel at all (archived, or the bot removed)
CHANNEL_GONE = frozenset(
    {"is_archived", "channel_is_archived", "not_in_channel", "channel_not_found"}
)
#: the bot cannot post in a channel: gone, or the workspace does not allow it
CANNOT_POST = CHANNEL_GONE | frozenset({"restricted_action"})


class RefusalKind(enum.Enum):
    RATE_LIMITED = "rate_limited"  # wait as long as Slack asks
    SERVER = "server"  # Slack's own failure (a 5xx, or one told with 200): back off and retry
    AUTH = "auth"  # the token is refused: nothing gets through
    DM_REFUSED = "dm_refused"  # a person cannot be written to
    GONE = "gone"  # the channel or thread is gone for good
    OTHER = "other"  # anything else: retried a few times


@dataclass(frozen=True)
class Refusal:
    kind: RefusalKind
    #: Slack's error string, or `http_<status>` when it gave none
    error: str

    @property
    def passing(self) -> bool:
        """Slack refused for now (a rate limit, its own failure): the same call
        later may well go through."""
        return self.kind in (RefusalKind.RATE_LIMITED, RefusalKind.SERVER)


def error_of(exc: SlackApiError) -> str:
    """Slack's error string for a refusal, empty when it gave none (an answer
    that was not JSON: the SDK then hands over the raw HTTP response)."""
    read = getattr(exc.response, "get", None)
    try:
        return str(read("error") or "") if callable(read) else ""
    except Exception:  # a body the SDK kept as text or bytes
        return ""


def status_of(exc: SlackApiError) -> int:
    """The HTTP status of a refusal, whichever response object the SDK gave."""
    status = getattr(exc.response, "status_code", None)
    if status is None:
        status = getattr(exc.response, "status", 0)
    return status if isinstance(status, int) else 0


def classify(status: int, error: str, *, dm: bool = False) -> Refusal:
    """The kind of a refusal with HTTP `status` and Slack's `error` (already
    `http_<status>` when Slack gave none). `dm`: the message was a DM to a person,
    whose refusals mean only that person cannot be written to."""
    if status == 429 or error == "ratelimited":
        kind = RefusalKind.RATE_LIMITED
    elif status >= 500 or error in PASSING_ERRORS or _unreadable(status, error):
        kind = RefusalKind.SERVER
    elif error in AUTH_ERRORS:
        kind = RefusalKind.AUTH
    elif dm and error in DM_REFUSALS:
        kind = RefusalKind.DM_REFUSED
    elif error in PERMANENT_ERRORS:
        kind = RefusalKind.GONE
    else:
        kind = RefusalKind.OTHER
    return Refusal(kind, error)


def _unreadable(status: int, error: str) -> bool:
    """HTTP 2xx with no error to read (an HTML page, a body cut off): not Slack's
    answer but whatever stands in front of it in an incident, so passing."""
    return 200 <= status < 300 and error in ("", f"http_{status}")


def refusal_of(exc: SlackApiError, *, dm: bool = False) -> Refusal:
    """`classify` of an SDK refusal."""
    status = status_of(exc)
    return classify(status, error_of(exc) or f"http_{status}", dm=dm)
