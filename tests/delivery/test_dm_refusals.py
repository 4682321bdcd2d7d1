"""A personal DM Slack refuses for good (the person blocked the app, turned its
Messages tab off, or left): set aside as dead at once, never retried, with no
subscription to end. Pure: Slack's refusal in, the row's fate out."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.delivery.outcome import classify
from bot.outbox.contract.payloads import Kind
from bot.outbox.contract.rows import State
from bot.outbox.table import OutboxMessage


def _refusal(error: str) -> SlackApiError:
    response = AsyncSlackResponse(
        client=None,  # type: ignore[arg-type]
        http_verb="POST",
        api_url="https://slack.test/api/chat.postMessage",
        req_args={},
        data={"ok": False, "error": error},
        headers={},
        status_code=200,
    )
    return SlackApiError(error, response)


@pytest.mark.parametrize(
    "error", ["cannot_dm_bot", "messages_tab_disabled", "user_not_found", "user_disabled"]
)
def test_a_dm_to_someone_who_cannot_get_it_is_dead_at_once(error: str) -> None:
    row = OutboxMessage(id=7, kind=Kind.DM, channel_id="U123", attempts=1, subscription_id=None)
    result = classify(row, _refusal(error), {})
    assert result.state is State.DEAD and result.error == error
    assert not result.end_subscription and not result.tell_operators
