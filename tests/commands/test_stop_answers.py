"""Stop session and Stop resource when Together answers oddly, through a real
`rl-bot serve`, signed Slack clicks and the Together-shaped server: the person
is told what is known (stopped, not stopped and why, or not known yet), never
that a stop Together accepted failed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.simulated import FakeSlack, FakeTogether
from bot.simulated.together import error_body
from tests.support import BotProcess, wait_until

pytestmark = pytest.mark.backend_independent(
    "how Together's answers to a stop are told; the database only stores"
)
SID = "123e4567-e89b-12d3-a456-426614174000"
SID2 = "223e4567-e89b-12d3-a456-426614174000"
RES = "res-idle"
OPS = "COPS"
ALERT_TS = "1700000000.000100"  # the idle alert the Stop resource button is on
ALLOWED = {"STOP_ALLOWED_USER_IDS": "U123"}


def said(message: dict[str, Any] | None) -> str:
    return json.dumps(message or {}, ensure_ascii=False)


def subscribe(bot: BotProcess, slack: FakeSlack, sid: str, channel: str = "C123") -> str:
    """Subscribe this channel; the root card's ts."""
    token = f"sub-{sid}-{channel}"
    bot.command(f"subscribe {sid}", response_url=slack.response_url(token), channel_id=channel)
    assert "Subscribed" in said(slack.wait_for_response(token))
    return [c.ts for c in slack.successful_posts(channel) if c.thread_ts is None and c.ts][-1]


def thread_posts(slack: FakeSlack, channel: str, root: str) -> list[str]:
    return [
        (c.text or "") + json.dumps(c.blocks or [], ensure_ascii=False)
        for c in slack.successful_posts(channel)
        if c.thread_ts == root
    ]


def click_stop(bot: BotProcess, slack: FakeSlack, token: str, sid: str = SID, **at: Any) -> str:
    """Click Stop session on a card; what the clicker was told."""
    bot.click("rl_stop", sid, response_url=slack.response_url(token), **at)
    return said(slack.wait_for_response(token))


def click_stop_resource(
    bot: BotProcess, slack: FakeSlack, token: str, resource_id: str = RES
) -> str:
    """Click Stop resource on an idle alert on-call; what the clicker was told."""
    bot.click(
        "rl_stop_resource",
        resource_id,
        response_url=slack.response_url(token),
        channel_id=OPS,
        message_ts=ALERT_TS,
        is_ephemeral=False,
    )
    return said(slack.wait_for_response(token))


# --- accepted, with an odd answer and no read after it -------------------------------------------


def test_a_session_stop_together_accepted_is_not_called_failed_when_its_state_cannot_be_read(
    start_bot: Any, slack: FakeSlack, together: FakeTogether
) -> None:
    bot = start_bot(**ALLOWED)
    together.add(SID)
    root = subscribe(bot, slack, SID)
    together.fail(SID, route="get", status=503)  # every read of it fails, until cleared
    together.fail(SID, route="stop", body='{"accepted": true}', after=True, times=1)
    answer = click_stop(bot, slack, "odd", message_ts=root, is_ephemeral=False)
    assert together.stop_requests == [SID]
    assert "not stopped" not in answer, answer
    assert "accepted the stop" in answer and "thread" in answer, answer
    wait_until(
        lambda: any(
            "<@U123>" in p and "accepted the stop" in p for p in thread_posts(slack, "C123", root)
        ),
        what="who stopped it, in the thread",
    )
    # Once Together can be read again, the poller tells the thread.
    together.clear_faults()
    wait_until(
        lambda: any("Stopping" in p for p in thread_posts(slack, "C123", root)),
        what="the stop confirmed in the thread",
    )


def test_a_resource_stop_together_accepted_is_not_called_failed_when_its_state_cannot_be_read(
    start_bot: Any, slack: FakeSlack, together: FakeTogether
) -> None:
    bot = start_bot(**ALLOWED)
    together.add_resource(RES, "READY")
    together.fail(RES, route="resource", status=503)
    together.fail(
        RES,
        route="resource_stop",
        body="<html>OK</html>",
        content_type="text/html",
        after=True,
        times=1,
    )
    answer = click_stop_resource(bot, slack, "odd")
    assert together.resource_stop_requests == [(RES, False)]
    assert "not stopped" not in answer, answer
    assert "accepted the stop" in answer and RES in answer, answer
    [note] = thread_posts(slack, OPS, ALERT_TS)
    assert "<@U123>" in note and "accepted the stop" in note
    # A resource that is gone by the time it is read again was still stopped.
    together.clear_faults()
    together.add_resource("res-gone", "READY")
    together.fail("res-gone", route="resource", status=404)
    together.fail("res-gone", route="resource_stop", body="[]", after=True, times=1)
    answer = click_stop_resource(bot, slack, "gone", "res-gone")
    assert "accepted the stop" in answer and "no such" not in answer, answer


# --- Together refuses: in its own words ----------------------------------------------------------

HOSTILE = "<!channel> not now, see <https://evil.example|here> & retry"


def test_a_refused_resource_stop_is_told_in_togethers_words_bounded_and_inert(
    start_bot: Any, slack: FakeSlack, together: FakeTogether
) -> None:
    bot = start_bot(**ALLOWED)
    together.add_resource(RES, "READY")  # no session on it: not why Together refuses
    reason = "Model resource is being provisioned; try again once it is ready"
    refusal = error_body(reason, "failed_precondition")
    together.fail(RES, route="resource_stop", status=400, body=json.dumps(refusal), times=1)
    answer = click_stop_resource(bot, slack, "own-words")
    assert reason in answer and "still active" not in answer, answer

    long = error_body(HOSTILE + " " + "x" * 5000, "invalid_argument")
    together.fail(RES, route="resource_stop", status=400, body=json.dumps(long), times=1)
    answer = click_stop_resource(bot, slack, "hostile")
    assert "<!channel>" not in answer and "<https://" not in answer, answer
    assert "&lt;!channel&gt;" in answer and len(answer) < 3000, answer

    together.fail(RES, route="resource_stop", status=400, body="<html>Bad</html>", times=1)
    answer = click_stop_resource(bot, slack, "no-words")
    assert "did not stop" in answer and "no reason" in answer, answer
    assert together.resource_stop_requests == []
    assert thread_posts(slack, OPS, ALERT_TS) == []


# --- every other odd answer: not stopped and why, or not known ----------------------------------


def test_each_odd_answer_to_a_session_stop_is_told_truthfully(
    start_bot: Any, slack: FakeSlack, together: FakeTogether
) -> None:
    bot = start_bot(**ALLOWED)
    together.add(SID)
    root = subscribe(bot, slack, SID)
    at = {"message_ts": root, "is_ephemeral": False}
    stopping = error_body("Training session is already stopping", "failed_precondition")

    # Together refuses, with a reason (409, 400) or without one (a 422 with no error object).
    together.fail(SID, route="stop", status=409, body=json.dumps(stopping), times=1)
    answer = click_stop(bot, slack, "conflict", **at)
    assert "did not stop" in answer and "already stopping" in answer, answer
    assert "unavailable" not in answer and "did not answer" not in answer, answer
    invalid = error_body("session_id must be a UUID", "invalid_argument")
    together.fail(SID, route="stop", status=400, body=json.dumps(invalid), times=1)
    answer = click_stop(bot, slack, "invalid", **at)
    assert "did not stop" in answer and "must be a UUID" in answer, answer
    assert "could not read" not in answer, answer
    together.fail(SID, route="stop", status=422, body='{"detail": "unprocessable"}', times=1)
    answer = click_stop(bot, slack, "no-reason", **at)
    assert "did not stop" in answer and "no reason" in answer and "422" in answer, answer
    # A gateway's 404 page: the request never reached Together's API.
    together.fail(SID, route="stop", status=404, body="<html>404</html>", times=1)
    answer = click_stop(bot, slack, "gateway", **at)
    assert "not stopped" in answer and "HTTP 404" in answer, answer
    assert together.stop_requests == []

    # The stop took effect, but no answer came in time: not known, not "not stopped".
    together.fail(SID, route="stop", delay=3.0, after=True, times=1)
    answer = click_stop(bot, slack, "late", **at)
    assert together.stop_requests == [SID]
    assert "not stopped" not in answer and "could not tell whether" in answer, answer
    assert f"/rl-session {SID}" in answer, answer
    # A server error: whether it stopped is not known either.
    together.fail(SID, route="stop", status=502, times=1)
    answer = click_stop(bot, slack, "server", **at)
    assert "not stopped" not in answer and "could not tell whether" in answer, answer
    assert "HTTP 502" in answer, answer
    # Nothing was said in the thread for a stop that was not (known to be) made.
    assert not any("asked Together to stop" in p for p in thread_posts(slack, "C123", root))


def test_each_odd_answer_to_a_resource_stop_is_told_truthfully(
    start_bot: Any, slack: FakeSlack, together: FakeTogether
) -> None:
    bot = start_bot(**ALLOWED)
    together.add_resource(RES, "READY")
    conflict = error_body("Model resource is already stopping", "failed_precondition")
    together.fail(RES, route="resource_stop", status=409, body=json.dumps(conflict), times=1)
    answer = click_stop_resource(bot, slack, "conflict")
    assert "did not stop" in answer and "already stopping" in answer, answer
    assert "unavailable" not in answer, answer
    invalid = error_body("force must be a boolean", "invalid_argument")
    together.fail(RES, route="resource_stop", status=422, body=json.dumps(invalid), times=1)
    answer = click_stop_resource(bot, slack, "invalid")
    assert "did not stop" in answer and "force must be a boolean" in answer, answer
    answer = click_stop_resource(bot, slack, "missing", "res-none")  # Together has no such one
    assert "not stopped" in answer and "no such model resource" in answer, answer
    assert together.resource_stop_requests == []

    together.fail(RES, route="resource_stop", delay=3.0, after=True, times=1)
    answer = click_stop_resource(bot, slack, "late")
    assert together.resource_stop_requests == [(RES, False)]
    assert "not stopped" not in answer and "could not tell whether" in answer, answer
    together.fail(RES, route="resource_stop", status=503, times=1)
    answer = click_stop_resource(bot, slack, "server")
    assert "could not tell whether" in answer and "HTTP 503" in answer, answer
    assert thread_posts(slack, OPS, ALERT_TS) == []


# --- who may stop: Slack's answer must be a list of ids ------------------------------------------


def test_a_user_group_answer_that_is_not_a_list_allows_nobody(
    start_bot: Any, slack: FakeSlack, together: FakeTogether
) -> None:
    bot = start_bot(STOP_ALLOWED_USERGROUP="S1")
    together.add(SID)
    # "U1234,U777" contains "U123" as text; only a list of ids names members.
    slack.fail_next("usergroups.users.list", body={"ok": True, "users": "U1234,U777"})
    answer = click_stop(bot, slack, "text-members")
    assert "not allowed" in answer or "could not check" in answer, answer
    assert together.stop_requests == []
    slack.fail_next("usergroups.users.list", body={"ok": True, "users": ["U1234", 5, None]})
    answer = click_stop(bot, slack, "odd-members")
    assert "not allowed" in answer, answer
    assert together.stop_requests == []
