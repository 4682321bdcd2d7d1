"""How Slack's refusals are read: one kind per error string and status, the
status first (a 429 or a 5xx whatever the string), Slack's own failures told
with HTTP 200 as passing as a 5xx, a DM's refusals apart only
when the message was a DM. Pure."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.slack_web import Refusal, RefusalKind, error_of, refusal_of
from bot.slack_web.refusals import CHANNEL_GONE, PERMANENT_ERRORS, UPLOAD_FINAL, classify


def _refused(data: dict[str, object], status: int = 200) -> SlackApiError:
    response = AsyncSlackResponse(
        client=None,  # type: ignore[arg-type]
        http_verb="POST",
        api_url="https://slack.test/api/chat.postMessage",
        req_args={},
        data=data,
        headers={},
        status_code=status,
    )
    return SlackApiError("refused", response)


@pytest.mark.parametrize(
    ("status", "error", "kind"),
    [
        (429, "", RefusalKind.RATE_LIMITED),
        (200, "ratelimited", RefusalKind.RATE_LIMITED),
        (429, "channel_not_found", RefusalKind.RATE_LIMITED),
        (500, "", RefusalKind.SERVER),
        (503, "invalid_auth", RefusalKind.SERVER),
        (200, "invalid_auth", RefusalKind.AUTH),
        (200, "token_revoked", RefusalKind.AUTH),
        (200, "channel_not_found", RefusalKind.GONE),
        (200, "is_archived", RefusalKind.GONE),
        (200, "cannot_dm_bot", RefusalKind.GONE),
        (200, "internal_error", RefusalKind.SERVER),
        (200, "fatal_error", RefusalKind.SERVER),
        (200, "service_unavailable", RefusalKind.SERVER),
        (200, "request_timeout", RefusalKind.SERVER),
        (200, "team_added_to_org", RefusalKind.SERVER),
        (200, "not_allowed_token_type", RefusalKind.OTHER),
        (200, "msg_too_long", RefusalKind.OTHER),
        (404, "http_404", RefusalKind.OTHER),
    ],
)
def test_each_refusal_has_one_kind(status: int, error: str, kind: RefusalKind) -> None:
    assert classify(status, error) == Refusal(kind, error)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ("cannot_dm_bot", RefusalKind.DM_REFUSED),
        ("not_allowed_token_type", RefusalKind.DM_REFUSED),
        ("channel_not_found", RefusalKind.DM_REFUSED),
        ("thread_not_found", RefusalKind.GONE),
        ("invalid_auth", RefusalKind.AUTH),
        ("ratelimited", RefusalKind.RATE_LIMITED),
        ("internal_error", RefusalKind.SERVER),
    ],
)
def test_a_dm_refusal_is_told_apart_only_for_a_dm(error: str, kind: RefusalKind) -> None:
    assert classify(200, error, dm=True).kind is kind


def test_an_sdk_refusal_names_its_error_or_its_status() -> None:
    assert refusal_of(_refused({"ok": False, "error": "is_archived"})) == Refusal(
        RefusalKind.GONE, "is_archived"
    )
    assert refusal_of(_refused({"ok": False}, status=502)) == Refusal(
        RefusalKind.SERVER, "http_502"
    )
    assert error_of(_refused({"ok": False}, status=502)) == ""


def test_a_gone_channel_is_gone_for_delivery_and_final_for_an_upload() -> None:
    assert CHANNEL_GONE <= PERMANENT_ERRORS
    assert {"not_in_channel", "channel_not_found", "is_archived"} <= UPLOAD_FINAL
    assert all(classify(200, error).kind is RefusalKind.GONE for error in CHANNEL_GONE)
