"""`SlackWeb`: the calls the bot makes to Slack's Web API, each named for what it does.

A thin wrapper: each method is one Web API call with the same arguments the SDK
takes, and answers Slack's response as is. A refusal still raises the SDK's
`SlackApiError` (re-exported here, so callers need not import the SDK), read by
`bot.slack_web.refusals`. The retry policy belongs to the client it wraps
(`bot.runtime` builds one that retries and one, for delivery, that does not).
"""

from __future__ import annotations

from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

__all__ = ["SlackApiError", "SlackClientError", "SlackWeb"]


class SlackWeb:
    """The bot's outbound Slack calls, over one SDK client (`client`, for Bolt)."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def post(self, *, channel: str, **fields: Any) -> AsyncSlackResponse:
        """A new message (`chat.postMessage`): text, blocks, thread_ts, metadata…"""
        return await self.client.chat_postMessage(channel=channel, **fields)

    async def update(self, *, channel: str, ts: str, **fields: Any) -> AsyncSlackResponse:
        """A message redrawn in place (`chat.update`)."""
        return await self.client.chat_update(channel=channel, ts=ts, **fields)

    async def delete(self, *, channel: str, ts: str) -> AsyncSlackResponse:
        """A message taken back (`chat.delete`)."""
        return await self.client.chat_delete(channel=channel, ts=ts)

    async def upload(self, *, channel: str, **fields: Any) -> AsyncSlackResponse:
        """A file shared into a channel or thread (`files_upload_v2`)."""
        return await self.client.files_upload_v2(channel=channel, **fields)

    async def permalink(self, *, channel: str, ts: str) -> AsyncSlackResponse:
        """A link to one message (`chat.getPermalink`)."""
        return await self.client.chat_getPermalink(channel=channel, message_ts=ts)

    async def thread_replies(self, *, channel: str, ts: str, **fields: Any) -> AsyncSlackResponse:
        """One page of a thread (`conversations.replies`)."""
        return await self.client.conversations_replies(channel=channel, ts=ts, **fields)

    async def history(self, *, channel: str, **fields: Any) -> AsyncSlackResponse:
        """One page of a channel's messages (`conversations.history`)."""
        return await self.client.conversations_history(channel=channel, **fields)

    async def publish_home(self, *, user_id: str, view: dict[str, Any]) -> AsyncSlackResponse:
        """A person's App Home tab (`views.publish`)."""
        return await self.client.views_publish(user_id=user_id, view=view)

    async def usergroup_members(self, *, usergroup: str) -> AsyncSlackResponse:
        """The members of a user group (`usergroups.users.list`)."""
        return await self.client.usergroups_users_list(usergroup=usergroup)
