"""What the bot tells a person when it will not, or could not, do what they
asked: the Stop allowlist's refusals, a stop, keep-alive or download Together
did not do, a subscription Slack or the channel refused, a chart upload Slack
did not take, a Slack user with no Together user. The feature code decides
which case it is (Together's error kind and status, Slack's error code); these
functions only word it. Pure, and safe to put in mrkdwn: Together's own words
are made inert and bounded."""

from __future__ import annotations

import enum
from typing import Literal

from bot.rendering.text import ID_LIMIT, VALUE_LIMIT, code_span, inert, sentence

#: what a Stop click stops
Thing = Literal["session", "model resource"]
#: what the Stop allowlist guards: Stop itself, Download and Keep alive
Guarded = Literal["stop", "download", "keep alive"]


class AllowlistRefusal(enum.Enum):
    """Why the Stop allowlist (STOP_ALLOWED_USER_IDS, STOP_ALLOWED_USERGROUP) refuses someone."""

    NOT_CONFIGURED = "not_configured"  # no allowlist: nobody may
    NOT_ALLOWED = "not_allowed"  # not on it
    GROUP_UNREADABLE = "group_unreadable"  # Slack did not give the user group's members


_NOT_CONFIGURED: dict[Guarded, str] = {
    "stop": (
        "Stopping sessions from Slack is not enabled here. Ask your operator to put the "
        "people (or a user group) who may stop sessions on the Stop allowlist."
    ),
    "download": (
        "Downloading weights from Slack is not enabled here: it takes the Stop allowlist, "
        "which your operator sets (people or a user group)."
    ),
    "keep alive": (
        "Keeping resources up from Slack is not enabled here: it takes the Stop allowlist, "
        "which your operator sets (people or a user group)."
    ),
}
_NOT_ALLOWED: dict[Guarded, str] = {
    "stop": "You are not allowed to stop training sessions. Ask someone on the allowed list.",
    "download": (
        "You are not allowed to download checkpoint weights. Ask someone on the Stop list."
    ),
    "keep alive": "You are not allowed to keep model resources up. Ask someone on the Stop list.",
}
_GROUP_UNREADABLE = "I could not check the allowed user group just now; try again shortly."


def allowlist_refusal(refusal: AllowlistRefusal, guarded: Guarded) -> str:
    """The allowlist's refusal, worded for what was asked."""
    if refusal is AllowlistRefusal.NOT_CONFIGURED:
        return _NOT_CONFIGURED[guarded]
    if refusal is AllowlistRefusal.NOT_ALLOWED:
        return _NOT_ALLOWED[guarded]
    return _GROUP_UNREADABLE


# --- Stop ---------------------------------------------------------------------------------------


def stop_not_sent(thing: Thing, kind: str, why: str) -> str:
    """A stop Together turned away before acting (`kind`: not_found, auth,
    rate_limited, invalid_id); `why` is Together's error worded for sessions,
    reworded here for a model resource where it differs."""
    if thing == "model resource" and kind == "not_found":
        why = "Together has no such model resource."
    elif thing == "model resource" and kind == "invalid_id":
        why = "That is not a model resource id."
    return f":warning: The {thing} was not stopped. {why}"


def stop_refused(thing: Thing, together_message: str | None, status: int | None) -> str:
    """A stop Together refused (a 4xx it answered): in its own words, or a plain
    line when it gave none."""
    return f":no_entry_sign: {refused_words(thing, together_message, status)}"


def refused_words(thing: Thing, together_message: str | None, status: int | None) -> str:
    """Why Together refused a stop, in its own words (escaped and bounded, as all
    of its text is), or a plain line when it gave none."""
    if together_message:
        said = sentence(inert(together_message, VALUE_LIMIT))
        return f"Together did not stop the {thing}: {said}"
    hint = (
        " If a session on it is still active, stop that session first."
        if thing != "session"
        else ""
    )
    return f"Together did not stop the {thing} and gave no reason (HTTP {status}).{hint}"


def stop_not_taken(thing: Thing, status: int) -> str:
    """A stop Together never took (a redirect, a gateway's 404, too early): not stopped."""
    return (
        f":warning: The {thing} was not stopped: Together did not take the request "
        f"(HTTP {status}). Try again shortly."
    )


def stop_unknown(thing: Thing, thing_id: str, status: int | None) -> str:
    """A stop that may have happened: no answer in time (`status` None) or a
    server error. A session can be looked at; a resource only tried again."""
    if status is None:
        what = "no answer came back in time"
    else:
        what = f"it answered with a server error (HTTP {status})"
    if thing == "session":
        then = f"Run {code_span(f'/rl-session {thing_id}', ID_LIMIT)} to see its state."
    else:
        then = "Try again shortly to find out."
    return f":warning: I could not tell whether Together stopped the {thing}: {what}. {then}"


# --- Keep alive ---------------------------------------------------------------------------------


def keep_gone() -> str:
    return ":warning: Together has no such model resource any more; nothing to keep up."


def keep_not_sent(why: str) -> str:
    """Together turned the call away (auth, rate limit, a bad id): `why` is its error in words."""
    return f":warning: The resource was not kept up. {why}"


def keep_refused(together_message: str | None, status: int) -> str:
    """Together refused (a resource that is not READY), in its own words when it gave some."""
    if together_message:
        said = sentence(inert(together_message, VALUE_LIMIT))
        return f":no_entry_sign: Together did not keep the resource up: {said}"
    return f":no_entry_sign: Together did not keep the resource up (HTTP {status})."


def keep_unknown() -> str:
    return (
        ":warning: I could not tell whether Together kept the resource up (no clear answer "
        "came back). Try again shortly."
    )


# --- Download -----------------------------------------------------------------------------------

UNKNOWN_CHECKPOINT = (
    "That checkpoint is not one of the session's checkpoints any more, so I cannot fetch it."
)
CHECKPOINT_GONE = "Together has no such checkpoint any more."


def files_refused(together_message: str) -> str:
    """Together refused to list a checkpoint's files, in its own words."""
    return f"Together did not give the files: {sentence(inert(together_message, VALUE_LIMIT))}"


# --- Acknowledge --------------------------------------------------------------------------------

UNKNOWN_ALERT = (
    "I no longer know that alert (finished alerts are kept only for as long as your "
    "operator chose), so there is nothing to acknowledge."
)


# --- Subscriptions ------------------------------------------------------------------------------

#: Slack's refusals of a post that say the bot cannot post in the channel, in words
SLACK_CHANNEL_PROBLEMS = {
    "not_in_channel": "I am not in this channel. Invite me with `/invite @rl-bot`, then try again.",
    "channel_not_found": "I cannot see this channel. Invite me with `/invite @rl-bot`, then try again.",
    "is_archived": "This channel is archived, so I cannot post here.",
    "channel_is_archived": "This channel is archived, so I cannot post here.",
    "restricted_action": "This workspace does not let me post in this channel.",
}
DM_PROBLEM = "Subscriptions live in channels, not direct messages. Run this in a channel."
SUBSCRIBED_MEANWHILE = (
    "This channel was subscribed to this session a moment ago; updates go in its thread."
)


def slack_refusal(error: str) -> str:
    """Slack refused the card's post (`error` is its code, "" when it gave none)."""
    return SLACK_CHANNEL_PROBLEMS.get(error, f"Slack refused the message (`{error or 'error'}`).")


def already_ended(status_words: str) -> str:
    """A session that ended cannot be subscribed to (`status_words`: its status, as shown)."""
    return (
        f"This session is already {status_words.lower()}; "
        "nothing more will change, so there is nothing to subscribe to."
    )


# --- Charts -------------------------------------------------------------------------------------

MISSING_SCOPE = (
    "I cannot upload charts: the app lacks the `files:write` scope. An admin adds it under "
    "*OAuth & Permissions → Bot Token Scopes* (or in `manifest.yml`) and reinstalls the app. "
    "Cards and alerts keep working meanwhile."
)


def upload_refused(error: str) -> str:
    """Slack did not take a chart (`error`: its code, or the transfer's failure)."""
    if error == "not_in_channel":
        return "I cannot upload here: I am not in this channel. Invite me with `/invite @rl-bot`."
    return f"Slack refused the chart upload (`{error[:60]}`). Try again in a minute."


def upload_busy(wait: float) -> str:
    """Slack asks to wait longer than an upload waits."""
    return f"Slack is rate limiting uploads for {wait:.0f} s. Try again in a minute."


# --- CREATED_BY_USER_MAP ------------------------------------------------------------------------


def _unknown(slack_user: str, *, yours: bool) -> str:
    """Why a Slack user's sessions cannot be told apart, and what to ask the operator."""
    whose = "your Together user" if yours else f"the Together user of <@{slack_user}>"
    return (
        f"I do not know {whose}, so I cannot tell which sessions are "
        f"{'yours' if yours else 'theirs'}. Ask your operator to pair the Together user id "
        "(the *Created by* on the sessions' cards) with the Slack member ID "
        f"`{slack_user}`."
    )


def unlisted_creator(slack_user: str, *, mine: bool) -> str:
    """`ls mine|@user` for a Slack user with no Together user."""
    return _unknown(slack_user, yours=mine)


def unmapped_answer(slack_user: str, *, caller: str) -> str:
    """A follow rule for a Slack user with no Together user (mrkdwn)."""
    return f"{_unknown(slack_user, yours=slack_user == caller)} Or use `all`."
