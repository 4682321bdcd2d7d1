"""The pure rules, without processes: the database clock used for leases,
bounded dedupe keys, claim sizing, what counts as Together's "not found", and
which listed Slack messages carry a dedupe key."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.dialects import postgresql

from bot.delivery.duplicates import _carries
from bot.outbox.contract.rows import MAX_KEY_LENGTH, bounded_key
from bot.poll.pace import claim_size
from bot.settings.model import Settings
from bot.store.engine import make_engine
from bot.store.tables import db_now
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError


def _sqlite_scalar(expr: Any) -> Any:
    async def go() -> Any:
        engine = make_engine("sqlite:///:memory:")
        try:
            async with engine.connect() as conn:
                return (await conn.execute(select(expr))).scalar_one()
        finally:
            await engine.dispose()

    return asyncio.run(go())


def test_db_now_on_sqlite_is_naive_utc_and_takes_an_offset() -> None:
    now = datetime.now(UTC).replace(tzinfo=None)
    value = _sqlite_scalar(db_now())
    assert isinstance(value, datetime) and value.tzinfo is None
    assert abs(value - now) < timedelta(seconds=2)
    later = _sqlite_scalar(db_now(90.5))
    assert timedelta(seconds=89) < later - now < timedelta(seconds=92)
    earlier = _sqlite_scalar(db_now(-30))
    assert timedelta(seconds=-32) < earlier - now < timedelta(seconds=-28)


def test_db_now_compares_with_stored_times_as_sqlalchemy_writes_them() -> None:
    # SQLAlchemy stores naive datetimes on SQLite as 'YYYY-MM-DD HH:MM:SS.ffffff' text.
    soon = (datetime.now(UTC) + timedelta(seconds=5)).strftime("%Y-%m-%d %H:%M:%S.%f")
    assert _sqlite_scalar(db_now() < soon) == 1
    assert _sqlite_scalar(db_now(10) < soon) == 0


def test_db_now_on_postgresql_is_the_statement_time_in_utc() -> None:
    sql = str(select(db_now(2)).compile(dialect=postgresql.dialect()))
    assert "statement_timestamp() AT TIME ZONE 'UTC'" in sql
    assert "make_interval(secs =>" in sql


def test_bounded_keys_keep_short_keys_and_hash_long_ones() -> None:
    assert bounded_key("oncall", "abc", "CODE|2026") == "oncall:abc:CODE|2026"
    long = bounded_key("oncall", "abc", "E" * 5000)
    assert len(long) <= MAX_KEY_LENGTH and long.startswith("oncall:sha256:")
    assert long == bounded_key("oncall", "abc", "E" * 5000)
    assert long != bounded_key("oncall", "abd", "E" * 5000)
    assert len(bounded_key("oncall", "x" * 10_000, "")) <= MAX_KEY_LENGTH


def test_bounded_keys_hash_a_nul_which_postgresql_text_refuses() -> None:
    key = bounded_key("oncall", "abc", "CODE_\x00|2026")
    assert "\x00" not in key and key.startswith("oncall:sha256:")
    assert key != bounded_key("oncall", "abc", "CODE_|2026")


@pytest.mark.parametrize(
    ("rps", "lease", "batch", "expected"),
    [(50, 120, 5000, 3000), (50, 120, 1000, 1000), (3, 2, 5000, 3), (0.1, 1, 5000, 1)],
)
def test_a_poll_claim_fits_in_half_a_lease(
    rps: float, lease: float, batch: int, expected: int
) -> None:
    settings = Settings(
        _env_file=None, together_max_rps=rps, lease_seconds=lease, poll_batch_size=batch
    )
    assert claim_size(settings) == expected


def _decode(status: int, content: bytes, content_type: str) -> TogetherError:
    client = TogetherClient(httpx.AsyncClient(), base_url="http://t/v1", api_key="k")
    response = httpx.Response(status, content=content, headers={"content-type": content_type})
    with pytest.raises(TogetherError) as caught:
        client._decode(response)
    return caught.value


def test_only_togethers_json_error_is_not_found() -> None:
    json_404 = b'{"error": {"message": "Training session not found", "code": "not_found"}}'
    assert _decode(404, json_404, "application/json").kind == "not_found"
    for body, kind in [
        (b"<html><h1>404 Not Found</h1></html>", "text/html"),
        (b'{"detail": "Not Found"}', "application/json"),
        (b'{"error": "not found"}', "application/json"),
        (b"", "text/plain"),
    ]:
        error = _decode(404, body, kind)
        assert error.kind == "unavailable" and error.transient, body


@pytest.mark.parametrize(
    "message",
    [
        "a string",
        7,
        None,
        {"metadata": "nope"},
        {"metadata": {"event_type": "rl_bot_notification", "event_payload": "x"}},
        {"metadata": {"event_type": "other", "event_payload": {"dedupe_key": "k"}}},
        {"metadata": {"event_type": "rl_bot_notification", "event_payload": {"dedupe_key": 1}}},
    ],
)
def test_odd_listed_messages_never_match_and_never_raise(message: Any) -> None:
    assert _carries(message, "k") is False


def test_our_listed_message_matches_its_own_key_only() -> None:
    ours = {
        "ts": "1.0",
        "metadata": {"event_type": "rl_bot_notification", "event_payload": {"dedupe_key": "k"}},
    }
    assert _carries(ours, "k") and not _carries(ours, "other")


def _row(attempts: int) -> Any:
    from bot.outbox.table import OutboxMessage

    return OutboxMessage(id=7, channel_id="C1", attempts=attempts, dedupe_key="k")


def test_every_retry_ends_at_the_attempt_cap_but_a_rejected_token() -> None:
    from bot.delivery.outcome import SendResult, give_up, retry_later
    from bot.outbox.contract.rows import State

    early = retry_later(_row(2), None, "http_500")
    assert give_up(_row(2), early, 3) is early
    dead = give_up(_row(3), retry_later(_row(3), None, "http_500"), 3)
    assert (dead.state, dead.error, dead.tell_operators) == (State.DEAD, "http_500", True)
    auth = SendResult(7, State.PENDING, retry_in=60.0, error="invalid_auth")
    assert give_up(_row(99), auth, 3) is auth
    # Posted, but the root card kept being refused: sent, never dead, never posted again.
    owed = retry_later(_row(3), 1.0, "ratelimited")
    owed.sent_ts = "1.000001"
    done = give_up(_row(3), owed, 3)
    assert (done.state, done.sent_ts, done.tell_operators) == (State.SENT, "1.000001", False)
    sent = SendResult(7, State.SENT, sent_ts="1.1")
    assert give_up(_row(99), sent, 3) is sent
