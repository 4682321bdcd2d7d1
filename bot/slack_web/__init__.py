"""Outbound Slack: the one place that calls Slack's Web API, and the one reading
of what Slack's refusals mean.

The mirror of `bot.together`: feature code holds a `SlackWeb` and never the SDK's
client, so what the bot may ask of Slack, and how a refusal is read, have one home.
"""

from bot.slack_web.client import SlackApiError, SlackClientError, SlackWeb
from bot.slack_web.refusals import Refusal, RefusalKind, error_of, refusal_of

__all__ = [
    "Refusal",
    "RefusalKind",
    "SlackApiError",
    "SlackClientError",
    "SlackWeb",
    "error_of",
    "refusal_of",
]
