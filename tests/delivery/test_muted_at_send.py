"""A muted thread stays quiet whenever its rows were queued: a paging metric
rule's crossing, queued before the thread was muted (and held up behind other
rows), is not told in the thread nor charted there when it is finally sent; its
on-call page is. Delivery in-process against the Slack-shaped server."""

from __future__ import annotations

from datetime import timedelta

from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.delivery.loop import Delivery, deliver_due
from bot.outbox.contract.payloads import RulePayload
from bot.outbox.contract.rows import Thread
from bot.outbox.contract.rule_rows import rule_rows
from bot.outbox.queue import insert_outbox
from bot.outbox.table import OutboxMessage
from bot.settings.model import Settings
from bot.simulated import FakeSlack
from bot.slack_web import SlackWeb
from bot.store.tables import Subscription, utcnow
from tests.support.store_rows import add_subscription, add_watch

SID = "123e4567-e89b-12d3-a456-426614174000"
OPS = "COPS"


async def test_a_paging_rules_crossing_queued_before_a_mute_is_heard_only_on_call(
    maker: async_sessionmaker[AsyncSession],
) -> None:
    async with maker() as db, db.begin():
        sub = await add_subscription(db, SID)
        await add_watch(db, SID)
        thread = Thread(sub.id, SID, sub.channel_id, sub.root_ts)
        crossing = RulePayload(
            metric="kl", op=">", threshold=8.0, value=8.5, step=3420, since=utcnow(), page=True
        )
        # queued while the thread was not muted
        await insert_outbox(
            db, rule_rows(crossing, rule_id=1, thread=thread, muted=False, oncall_channel=OPS)
        )
    async with maker() as db, db.begin():  # then the thread is muted
        found = await db.get(Subscription, sub.id)
        assert found is not None
        found.muted_until = utcnow() + timedelta(hours=1)
    settings = Settings(_env_file=None, channel_min_interval_seconds=0, replica_id="r1")
    with FakeSlack() as slack:
        web = SlackWeb(AsyncWebClient(base_url=slack.api_url, token="xoxb-test"))
        delivery = Delivery(sessionmaker=maker, slack=web, settings=settings, owner="r1")
        while await deliver_due(delivery):
            pass
        assert slack.successful_posts(sub.channel_id) == []  # nothing in the muted thread
        assert slack.calls_to("files.getUploadURLExternal") == []  # nor its chart
        [page] = slack.successful_posts(OPS)
        assert "kl" in str(page.text) + str(page.blocks)
    # the thread's crossing and chart set aside; on-call's page told
    assert sorted(await _rows(maker)) == [
        ("chart", "cancelled"),
        ("rule", "cancelled"),
        ("rule", "sent"),
    ]


async def _rows(maker: async_sessionmaker[AsyncSession]) -> list[tuple[str, str]]:
    async with maker() as db:
        found = await db.execute(select(OutboxMessage.kind, OutboxMessage.state))
        return [(str(k), str(s)) for k, s in found]
