"""The Stop session workflow (`bot.commands.stop`) on its own, against the
Slack- and Together-shaped servers: what it does once Together has accepted a
stop, whatever fails after that. Fast: no bot process."""

from __future__ import annotations

from typing import Any

import httpx
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.exc import OperationalError

from bot.commands import stop as stopping
from bot.commands.asker import Asker
from bot.settings.model import Settings
from bot.simulated import FakeSlack, FakeTogether
from bot.slack_web import SlackWeb
from bot.together.client import TogetherClient
from tests.support.deps import CommandParts

SID = "123e4567-e89b-12d3-a456-426614174000"
CARD_TS = "1700000000.000200"


class BrokenDatabase:
    """A sessionmaker whose database is down."""

    def __call__(self) -> Any:
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))


async def test_a_stop_together_accepted_is_told_when_the_database_then_fails(
    slack: FakeSlack, together: FakeTogether
) -> None:
    together.add(SID)
    settings = Settings(_env_file=None, stop_allowed_user_ids=frozenset({"U123"}))
    async with httpx.AsyncClient() as http:
        client = TogetherClient(http, base_url=together.base_url, api_key=together.api_key)
        parts = CommandParts(
            settings=settings,
            together=client,
            sessionmaker=BrokenDatabase(),
            slack=SlackWeb(AsyncWebClient(base_url=slack.api_url, token="xoxb-test")),
        )
        done = await stopping.stop_session(
            parts,
            asker=Asker("T1", "C123", "U123"),
            session_id=SID,
            message_ts=CARD_TS,
        )
    assert together.stop_requests == [SID]
    assert done.session is not None and done.session.status.endswith("STOPPING")
    assert done.said is not None and "<@U123>" in done.said["text"]
    # The subscription could not be read: said under the clicked card instead.
    [note] = [c for c in slack.successful_posts("C123") if c.thread_ts == CARD_TS]
    assert "<@U123>" in (note.text or "") and done.said_in_thread
