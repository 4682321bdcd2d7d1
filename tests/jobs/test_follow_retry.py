"""The pure rules of discovery's retries: which failures are tried again, how
long it waits, when it gives up, and how many GETs a run may send."""

from __future__ import annotations

from sqlalchemy.exc import DataError, OperationalError

from bot.jobs.follow_retry import (
    MAX_ATTEMPTS,
    MAX_DELAY_SECONDS,
    Failure,
    backoff,
    failure_of,
    retry_in,
)
from bot.slack_web import RefusalKind
from bot.slack_web.refusals import classify
from bot.subscriptions.errors import SubscriptionError
from bot.together.errors import TogetherError
from tests.support.slack_errors import slack_api_error


def slack_refused(error: str, status: int = 200) -> SubscriptionError:
    try:
        raise SubscriptionError("refused") from slack_api_error(error, status)
    except SubscriptionError as exc:
        return exc


def test_only_what_cannot_be_subscribed_is_left() -> None:
    for error in ("is_archived", "not_in_channel", "channel_not_found"):
        assert failure_of(slack_refused(error)) == (Failure.CHANNEL_GONE, error)
    for error in ("internal_error", "fatal_error", "service_unavailable", "ratelimited"):
        assert failure_of(slack_refused(error))[0] is Failure.PASSING
    # One reading of Slack with delivery's: the status first, so a 503 or a 429 passes
    # whatever its string says, and Slack's passing refusals are delivery's.
    for status in (429, 503):
        assert failure_of(slack_refused("channel_not_found", status))[0] is Failure.PASSING
    for error in ("internal_error", "request_timeout", "team_added_to_org"):
        assert classify(200, error).kind is RefusalKind.SERVER
    assert failure_of(SubscriptionError("already stopped"))[0] is Failure.CANNOT
    assert failure_of(TogetherError("not_found", status=404))[0] is Failure.CANNOT
    assert failure_of(TogetherError("unavailable", status=503))[0] is Failure.PASSING
    refused = DataError("INSERT", {}, Exception("invalid input syntax for type json"))
    assert failure_of(refused)[0] is Failure.CANNOT
    gone = OperationalError("INSERT", {}, Exception("connection refused"))
    assert failure_of(gone)[0] is Failure.PASSING
    assert failure_of(RuntimeError("anything else"))[0] is Failure.PASSING


def test_retries_back_off_up_to_a_cap_then_stop() -> None:
    delays = [retry_in(n, base=5.0) for n in range(1, MAX_ATTEMPTS + 1)]
    assert delays[:4] == [5.0, 10.0, 20.0, 40.0]
    assert delays[-1] is None  # given up after MAX_ATTEMPTS tries
    assert backoff(100, base=60.0) == MAX_DELAY_SECONDS
    assert backoff(1, base=0.01) == 1.0  # never faster than a second
