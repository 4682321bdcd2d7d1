"""A personal DM Slack refuses for good (the person blocked the app, turned its
Messages tab off, or left): set aside as dead at once, never retried, with no
subscription to end. Pure: Slack's refusal in, the row's fate out."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError

from bot.delivery.outcome import classify
from bot.outbox.contract.payloads import Kind
from bot.outbox.contract.rows import State
from bot.outbox.table import OutboxMessage
from tests.support.slack_errors import slack_api_error


def _refusal(error: str) -> SlackApiError:
    return slack_api_error(error)


@pytest.mark.parametrize(
    "error", ["cannot_dm_bot", "messages_tab_disabled", "user_not_found", "user_disabled"]
)
def test_a_dm_to_someone_who_cannot_get_it_is_dead_at_once(error: str) -> None:
    row = OutboxMessage(id=7, kind=Kind.DM, channel_id="U123", attempts=1, subscription_id=None)
    result = classify(row, _refusal(error), {})
    assert result.state is State.DEAD and result.error == error
    assert not result.end_subscription and not result.tell_operators
