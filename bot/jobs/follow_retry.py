"""What discovery does when a session a rule took could not be subscribed, and how
often it asks Together again. Pure rules.

A failure is one of three kinds. The channel is gone (archived, the bot
removed): its rules are switched off. The session cannot be subscribed (it
ended, the channel was subscribed a moment ago, the database refused what was
written): the claim stays and the session is left. Anything else passes (Slack
or Together refusing for now, a 429 that outlasted the retries, the database
unreachable): the claim stays and is tried again, backing off, `MAX_ATTEMPTS`
times in all.
"""

from __future__ import annotations

import enum
import math

from bot.slack_web import RefusalKind, SlackApiError, refusal_of
from bot.slack_web.refusals import CHANNEL_GONE
from bot.store.errors import refused_by_database
from bot.subscriptions.errors import SubscriptionError
from bot.together.errors import TogetherError

#: tries of one session's subscription, the first included, before it is left
MAX_ATTEMPTS = 6
#: the longest wait between two tries (and between two list passes that failed)
MAX_DELAY_SECONDS = 1800.0


class Failure(enum.Enum):
    CHANNEL_GONE = "channel_gone"
    CANNOT = "cannot"  # this session cannot be subscribed there: leave it
    PASSING = "passing"  # try again later


def failure_of(exc: BaseException) -> tuple[Failure, str]:
    """The kind of a failed subscription, and Slack's error when Slack refused."""
    if isinstance(exc, SubscriptionError):
        cause = exc.__cause__
        if isinstance(cause, SlackApiError):
            # Delivery's reading of Slack: its passing refusals (a 429, a 5xx, its
            # own failures told with 200) pass, whatever their string says.
            refusal = refusal_of(cause)
            gone = refusal.kind is RefusalKind.GONE and refusal.error in CHANNEL_GONE
            return (Failure.CHANNEL_GONE if gone else Failure.PASSING), refusal.error
        return Failure.CANNOT, ""  # ended, or subscribed a moment ago
    if isinstance(exc, TogetherError) and exc.status == 404:
        return Failure.CANNOT, ""  # Together no longer knows the session
    if refused_by_database(exc):
        return Failure.CANNOT, ""  # the database refused the row: it would again
    return Failure.PASSING, ""


def backoff(failures: int, *, base: float) -> float:
    """Seconds to wait after `failures` failures in a row: `base` doubled each
    time, `MAX_DELAY_SECONDS` at most."""
    if failures <= 0:
        return 0.0
    step = max(base, 1.0) * 2.0 ** min(failures - 1, 30)
    return min(MAX_DELAY_SECONDS, step) if math.isfinite(step) else MAX_DELAY_SECONDS


def retry_in(attempts: int, *, base: float) -> float | None:
    """When a session whose subscription failed `attempts` times in a row is tried
    again, in seconds; None once it has had its `MAX_ATTEMPTS` tries."""
    if attempts >= MAX_ATTEMPTS:
        return None
    return backoff(attempts, base=base)
