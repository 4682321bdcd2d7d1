"""Why a subscription cannot be made: the error that carries the person's
answer, and which Slack refusals mean the bot cannot post in the channel (the
words are `bot.rendering.refusals`)."""

from __future__ import annotations

from bot.rendering.refusals import slack_refusal
from bot.slack_web import SlackApiError, error_of
from bot.slack_web.refusals import CANNOT_POST

#: Slack's errors that say the bot cannot post in this channel at all
CHANNEL_PROBLEMS = CANNOT_POST


class SubscriptionError(Exception):
    """A problem to tell the user, already worded for them."""


def slack_problem(exc: SlackApiError) -> str:
    """Slack's refusal of the card's post, in words for the person."""
    return slack_refusal(error_of(exc))
