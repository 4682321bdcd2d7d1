"""Why a subscription cannot be made, in the words the person is answered with."""

from __future__ import annotations

from bot.slack_web import SlackApiError

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


def slack_problem(exc: SlackApiError) -> str:
    error = str(exc.response.get("error") or "")
    return SLACK_CHANNEL_PROBLEMS.get(error, f"Slack refused the message (`{error or 'error'}`).")
