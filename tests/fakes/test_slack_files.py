"""The Slack-shaped file upload flow, driven by slack_sdk's own `files_upload_v2`:
the SDK's calls are accepted and its reading of the answers works."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.simulated.slack import FakeSlack

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 100


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


async def test_files_upload_v2_puts_the_bytes_into_the_thread(slack: FakeSlack) -> None:
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
    root = await client.chat_postMessage(channel="C1", text="card")
    answer = await client.files_upload_v2(
        channel="C1",
        thread_ts=root["ts"],
        content=PNG,
        filename="chart.png",
        title="demo: metrics",
        alt_txt="reward 0.1 → 0.9",
        initial_comment="demo · steps 0–999",
    )
    assert answer["file"]["id"] == answer["files"][0]["id"]  # what the SDK reads back
    [upload] = slack.uploads_in("C1", root["ts"])
    assert upload.data == PNG and upload.alt_txt == "reward 0.1 → 0.9"
    assert upload.initial_comment == "demo · steps 0–999" and upload.title == "demo: metrics"
    assert any(m.get("files") for m in slack.thread("C1", root["ts"]))


async def test_without_files_write_the_sdk_raises_missing_scope(slack: FakeSlack) -> None:
    slack.missing_scopes.add("files:write")
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
    with pytest.raises(SlackApiError) as caught:
        await client.files_upload_v2(channel="C1", content=PNG, filename="chart.png")
    assert caught.value.response["error"] == "missing_scope"
    assert caught.value.response["needed"] == "files:write"
    assert not slack.uploads


async def test_a_refused_upload_url_fails_the_upload(slack: FakeSlack) -> None:
    slack.fail_next("upload", status=500, error="boom")
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
    with pytest.raises(Exception, match="Failed to upload"):
        await client.files_upload_v2(channel="C1", content=PNG, filename="chart.png")
    assert not slack.uploads
