"""A root card that cannot be drawn: that redraw is given up and its row is done,
so the channel's later rows never wait behind it. Pure: no process, no Slack
call (the card fails before one would be made)."""

from __future__ import annotations

import asyncio

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.delivery.send import redraw_root
from bot.outbox.contract.payloads import Kind, TransitionPayload
from bot.outbox.contract.rows import State
from bot.outbox.table import OutboxMessage
from bot.rendering import root_card
from bot.rendering.root_card import CardExtras
from bot.simulated.together import make_session
from bot.slack_web import SlackWeb
from bot.training.poll_progress import CardView
from bot.training.sessions import TrainingSession
from bot.training.snapshots import SessionSnapshot

SID = "a0000000-0000-0000-0000-000000000001"


def _row() -> OutboxMessage:
    session = SessionSnapshot.of(TrainingSession.model_validate(make_session(SID)))
    payload = TransitionPayload(
        old_status="TRAINING_SESSION_STATUS_RUNNING",
        new_status="TRAINING_SESSION_STATUS_STOPPING",
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


def test_a_root_card_that_cannot_be_drawn_gives_up_that_redraw_only(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Stands in for any drawing bug not met yet (a value no renderer expected).
    def cannot_draw(*_args: object, **_kwargs: object) -> object:
        raise ValueError("cannot convert float NaN to integer")

    monkeypatch.setattr(root_card, "card_with_extras", cannot_draw)
    # Nothing listens here: a call to Slack would fail the row for another reason.
    slack = SlackWeb(
        AsyncWebClient(token="xoxb-test", base_url="http://127.0.0.1:9/api/", timeout=1)
    )
    watch = CardExtras(progress=CardView())

    result = asyncio.run(redraw_root(_row(), slack=slack, extras=watch))

    assert result.state is State.SENT and result.retry_in is None
    assert result.sent_ts == "1700000000.000200"  # the post stands
    assert "could not draw a root card" in caplog.text
