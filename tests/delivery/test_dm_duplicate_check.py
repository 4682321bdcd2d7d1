"""The duplicate check of a retried DM, against the Slack-shaped server: a DM
is addressed to a user id, whose history Slack may refuse to list; that says
nothing about the DM, so the DM is posted (a repeat at worst, never a loss),
while a channel row's "channel gone" still ends its subscription. Fast: no
bot process."""

from __future__ import annotations

from datetime import datetime

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.delivery.duplicates import already_posted
from bot.outbox.contract.payloads import Kind
from bot.outbox.table import OutboxMessage
from bot.simulated import FakeSlack
from bot.slack_web import SlackWeb


def _row(kind: Kind, channel: str) -> OutboxMessage:
    return OutboxMessage(
        id=7,
        dedupe_key="creator-dm:UDANA:x",
        kind=kind,
        channel_id=channel,
        payload={},
        attempts=2,
        created_at=datetime(2026, 12, 2, 10, 0),
    )


@pytest.mark.parametrize("kind", [Kind.CREATOR_DM, Kind.DM])
async def test_a_dms_refused_history_is_not_a_channel_gone(kind: Kind) -> None:
    with FakeSlack() as slack:
        client = SlackWeb(AsyncWebClient(token="xoxb-test", base_url=slack.api_url))
        slack.fail_next("conversations.history", error="channel_not_found", times=2)
        assert await already_posted(client, _row(kind, "UDANA")) is None
        with pytest.raises(SlackApiError):
            await already_posted(client, _row(Kind.OPERATOR, "CGONE"))
