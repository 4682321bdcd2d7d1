"""Slack's own failures told with HTTP 200 and `ok: false` (`internal_error`,
`fatal_error`, `service_unavailable`, `request_timeout`, `team_added_to_org`) are
as passing as a 503: delivery retries them, backing off, up to
DELIVERY_MAX_ATTEMPTS, never setting a row aside after the few tries of an
unknown refusal. Pure: Slack's refusal in, the row's fate out."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError

from bot.delivery.outcome import MAX_OTHER_ATTEMPTS, classify, give_up
from bot.outbox.contract.payloads import Kind
from bot.outbox.contract.rows import State
from bot.outbox.table import OutboxMessage
from tests.support.slack_errors import slack_api_error

PASSING = ["internal_error", "fatal_error", "service_unavailable", "request_timeout"]


def _refusal(error: str, status: int = 200) -> SlackApiError:
    return slack_api_error(error, status)


def _row(attempts: int, kind: Kind = Kind.TRANSITION) -> OutboxMessage:
    return OutboxMessage(
        id=7, kind=kind, channel_id="C1", attempts=attempts, subscription_id=3, sent_ts=None
    )


@pytest.mark.parametrize("error", [*PASSING, "team_added_to_org"])
@pytest.mark.parametrize("kind", [Kind.TRANSITION, Kind.CREATOR_DM])
def test_a_passing_refusal_is_retried_like_a_503(error: str, kind: Kind) -> None:
    for attempts in (1, MAX_OTHER_ATTEMPTS, MAX_OTHER_ATTEMPTS + 3):
        row = _row(attempts, kind)
        told_200 = classify(row, _refusal(error), {})
        told_503 = classify(row, _refusal("http_503", status=503), {})
        assert told_200.state is State.PENDING, (error, attempts)
        assert told_200.retry_in == told_503.retry_in
        assert not told_200.tell_operators and not told_200.end_subscription
        assert told_200.error == error


def test_a_passing_refusal_ends_only_at_the_last_attempt() -> None:
    last = 30
    outcome = classify(_row(last - 1), _refusal("internal_error"), {})
    assert give_up(_row(last - 1), outcome, last).state is State.PENDING
    outcome = classify(_row(last), _refusal("internal_error"), {})
    ended = give_up(_row(last), outcome, last)
    assert ended.state is State.DEAD and ended.tell_operators


def test_an_unknown_refusal_still_has_only_a_few_tries() -> None:
    assert classify(_row(1), _refusal("msg_too_long"), {}).state is State.PENDING
    final = classify(_row(MAX_OTHER_ATTEMPTS), _refusal("msg_too_long"), {})
    assert final.state is State.DEAD and final.tell_operators
