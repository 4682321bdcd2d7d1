"""A root card's redraw that Slack refuses for now is retried, however Slack says
"for now": HTTP 200 with `ok: false` and one of its own failures
(`internal_error`, ...) is as passing for `chat.update` as a 503 or a rate limit,
so a transition's card (a session's final status) is not given up to an outage.
A refusal no retry changes (the root deleted) still gives up that redraw only.
Pure: a Slack that refuses, no process."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.delivery.send import redraw_root
from bot.outbox.contract.payloads import Kind, TransitionPayload
from bot.outbox.contract.rows import State
from bot.outbox.table import OutboxMessage
from bot.simulated.together import make_session
from bot.training.sessions import TrainingSession
from bot.training.snapshots import SessionSnapshot
from tests.support.slack_errors import slack_api_error

SID = "a0000000-0000-0000-0000-000000000001"


class _Refusing:
    """A Slack whose every `chat.update` is refused with HTTP `status` and `error`."""

    def __init__(self, error: str, status: int = 200) -> None:
        self.error, self.status, self.updates = error, status, 0

    async def update(self, *, channel: str, ts: str, **_: Any) -> None:
        self.updates += 1
        raise slack_api_error(self.error, self.status, method="chat.update")


def _row() -> OutboxMessage:
    session = SessionSnapshot.of(TrainingSession.model_validate(make_session(SID)))
    payload = TransitionPayload(
        old_status="TRAINING_SESSION_STATUS_RUNNING",
        new_status="TRAINING_SESSION_STATUS_COMPLETED",
        ended=True,
        session=session,
    )
    return OutboxMessage(
        id=7,
        kind=Kind.TRANSITION,
        channel_id="C1",
        thread_ts="1700000000.000100",
        sent_ts="1700000000.000200",
        attempts=1,
        subscription_id=3,
        payload=payload.model_dump(mode="json", exclude={"kind"}),
    )


@pytest.mark.parametrize(
    "error", ["internal_error", "fatal_error", "service_unavailable", "request_timeout"]
)
def test_a_passing_refusal_of_the_card_keeps_its_redraw_owed(error: str) -> None:
    slack = _Refusing(error)
    result = asyncio.run(redraw_root(_row(), slack=slack))  # type: ignore[arg-type]
    assert slack.updates == 1
    assert result.state is State.PENDING and result.error == error
    assert result.sent_ts == "1700000000.000200"  # the post stands; only the card is owed


def test_a_card_that_cannot_be_edited_gives_up_that_redraw_only() -> None:
    slack = _Refusing("message_not_found")
    result = asyncio.run(redraw_root(_row(), slack=slack))  # type: ignore[arg-type]
    assert result.state is State.SENT and result.retry_in is None
