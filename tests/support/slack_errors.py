"""A Slack Web API refusal as slack_sdk raises it, for tests of how the bot reads one."""

from __future__ import annotations

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_slack_response import AsyncSlackResponse


def slack_api_error(
    error: str,
    status: int = 200,
    *,
    method: str = "chat.postMessage",
    data: dict[str, object] | None = None,
) -> SlackApiError:
    """`SlackApiError` for `error` (or the whole body `data`) answered with `status`."""
    response = AsyncSlackResponse(
        client=None,  # type: ignore[arg-type]
        http_verb="POST",
        api_url=f"https://slack.test/api/{method}",
        req_args={},
        data=data if data is not None else {"ok": False, "error": error},
        headers={},
        status_code=status,
    )
    return SlackApiError(error, response)
