"""The org-wide error watch run in-process, on each database, with the listed
pages handed in: one session the watch cannot handle (an exception of any kind
while it is read, keyed or written) is set aside and every other error is paged."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import select

import bot.alerts.error_watch as error_watch
from bot.alerts.error_watch import page_new_errors
from bot.outbox.contract.payloads import Kind
from bot.outbox.table import OutboxMessage
from bot.settings.model import Settings
from bot.store.engine import make_engine, make_sessionmaker
from bot.together.list_pass import ListPass
from bot.training.sessions import RawSession, TrainingSession
from bot.training.time_bounds import utc_or_none
from tests.fakes import make_session

OPS = "COPS"
SETTINGS = Settings(_env_file=None, watch_all_errors=True, oncall_channel=OPS, replica_id="r0")


def sid(i: int) -> str:
    return f"{i:08d}-e000-4000-8000-000000000000"


class FakeLister:
    """Hands the watch whatever sessions the test lists."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.clock = time.monotonic

    async def get(self, statuses: Sequence[str], **_: Any) -> ListPass:
        out = ListPass(pages=1, complete=True)
        for row in self.rows:
            out.add(RawSession.from_text(json.dumps(row).encode()))
        return out


def errored(i: int, **over: Any) -> dict[str, Any]:
    when = (datetime.now(UTC) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    error = {"code": "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED", "message": "died"}
    return make_session(sid(i), "ERROR", error={**error, "occurred_at": when}, **over)


def run(db_url: str, lister: FakeLister, rounds: list[list[dict[str, Any]]]) -> list[Any]:
    """Run the watch once per round (the sessions listed then); the outbox rows after."""

    async def go() -> list[Any]:
        engine = make_engine(db_url)
        try:
            maker = make_sessionmaker(engine)
            rt: Any = SimpleNamespace(
                settings=SETTINGS, sessionmaker=maker, lister=lister, owner="r0"
            )
            for rows in rounds:
                lister.rows = rows
                await page_new_errors(rt)
            async with maker() as db:
                query = select(OutboxMessage.kind, OutboxMessage.session_id)
                return [tuple(r) for r in await db.execute(query.order_by(OutboxMessage.id))]
        finally:
            await engine.dispose()

    return asyncio.run(go())


def test_a_session_whose_page_raises_is_set_aside_and_the_others_are_paged(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_row = error_watch.oncall_row

    def oncall_row(channel: str, session: TrainingSession, **kw: Any) -> Any:
        if session.id == sid(2):
            raise ValueError("a value no code expected")
        return real_row(channel, session, **kw)

    monkeypatch.setattr(error_watch, "oncall_row", oncall_row)
    rows = run(db_url, FakeLister(), [[], [errored(i) for i in range(1, 5)], [errored(5)]])
    paged = [s for kind, s in rows if kind == Kind.ONCALL]
    assert sorted(paged) == [sid(1), sid(3), sid(4), sid(5)]
    assert [kind for kind, _ in rows].count(Kind.OPERATOR) == 1  # said once, not per run


def test_a_session_that_cannot_be_read_is_set_aside_and_the_others_are_paged(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = error_watch._is_news

    def is_news(session: TrainingSession, baseline: datetime) -> bool:
        if session.id == sid(3):
            raise OverflowError("date value out of range")
        return real(session, baseline)

    monkeypatch.setattr(error_watch, "_is_news", is_news)
    rows = run(db_url, FakeLister(), [[], [errored(i) for i in range(1, 5)]])
    assert sorted(s for kind, s in rows if kind == Kind.ONCALL) == [sid(1), sid(2), sid(4)]


def test_a_nul_in_an_error_code_is_paged_under_a_storable_key(db_url: str) -> None:
    nul = errored(1)
    nul["error"]["code"] = "CODE_\x00_NUL"
    rows = run(db_url, FakeLister(), [[], [nul, errored(2)], [nul, errored(2)]])
    assert sorted(s for kind, s in rows if kind == Kind.ONCALL) == [sid(1), sid(2)]


@pytest.mark.parametrize(
    "text", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"], ids=["year-1", "year-9999"]
)
def test_a_time_with_no_utc_equivalent_reads_as_none(text: str) -> None:
    assert utc_or_none(datetime.fromisoformat(text)) is None
    assert utc_or_none(datetime(2026, 1, 1, 5, tzinfo=timezone(timedelta(hours=5)))) == datetime(
        2026, 1, 1
    )
    assert utc_or_none(datetime(1, 1, 1)) == datetime(1, 1, 1)  # naive: already UTC
