"""One session's values never stop the poll loop for the others.

A value from Together that the bot's arithmetic cannot hold (a "never" timeout of
int64 max, a creation time whose offset carries it past the year 1 or 9999) is
clamped; any other exception while one session is judged or written sets that
session aside as a database refusal does (back-off, an operator note after
MAX_WRITE_FAILURES), and the rest of its batch is told as usual."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
from sqlalchemy import select, update

import bot.poll.record as record
from bot.outbox.table import OutboxMessage
from bot.poll.fetch import Fetched
from bot.poll.isolate import MAX_WRITE_FAILURES, store_apart
from bot.settings.model import Settings
from bot.store.engine import make_engine, make_sessionmaker
from bot.store.tables import WatchedSession, db_now, utcnow
from bot.training.rules import Progress, eta, idles_out_at
from bot.training.sessions import RawSession, TrainingSession
from bot.training.time_bounds import clamp, later, naive_utc, span, utc
from tests.fakes import FakeSlack, FakeTogether, make_session
from tests.support import BotFactory, query, wait_until, watched_rows
from tests.support.threads import notifications, subscribe

T = TypeVar("T")
INT64_MAX = 9223372036854775807
EARLIEST = "0001-01-01T00:00:00+05:00"  # before the year 1 in UTC
LATEST = "9999-12-31T23:59:59-05:00"  # after the year 9999 in UTC

# --- the clamp helper (pure) ----------------------------------------------------------------


def test_times_and_durations_from_outside_are_clamped_not_raised() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5)
    assert later(now, INT64_MAX) == datetime.max
    assert later(now, -INT64_MAX) == datetime.min
    assert later(now.replace(tzinfo=UTC), timedelta.max) == datetime.max.replace(tzinfo=UTC)
    assert later(now, 60) == now + timedelta(minutes=1)
    assert later(now, float("nan")) == now
    assert span(float("inf")) == timedelta.max and span(-1e300) == timedelta.min
    assert naive_utc(datetime.fromisoformat(EARLIEST)) == datetime.min
    assert naive_utc(datetime.fromisoformat(LATEST)) == datetime.max
    assert utc(datetime.fromisoformat("2026-01-02T05:04:05+02:00")) == now.replace(tzinfo=UTC)
    assert utc(now) == now.replace(tzinfo=UTC)
    assert clamp(float("nan"), 0, 1) == 0 and clamp(5, 0, 1) == 1 and clamp(-5, 0, 1) == 0


def test_a_never_timeout_idles_out_at_the_end_of_time() -> None:
    progress = Progress(step=1, since=datetime(2026, 1, 2), running=True)
    assert idles_out_at(progress, expires_at=None, inactive_timeout=INT64_MAX) == datetime.max


def test_a_rate_that_is_no_number_gives_no_eta() -> None:
    progress = Progress(step=1, since=datetime(2026, 1, 2), running=True, rate=float("nan"))
    assert eta(progress, 100, datetime(2026, 1, 2)) is None


# --- any exception in one session's write sets only it aside (each database) ----------------

GOOD = "a0000000-0000-4000-8000-000000000001"
BAD = "b0000000-0000-4000-8000-000000000002"
OWNER = "replica-a"
SETTINGS = Settings(_env_file=None, oncall_channel="COPS")


def _run(db_url: str, work: Callable[[Any], Awaitable[T]]) -> T:
    async def go() -> T:
        engine = make_engine(db_url)
        try:
            return await work(make_sessionmaker(engine))
        finally:
            await engine.dispose()

    return asyncio.run(go())


async def _watch(maker: Any, sid: str) -> None:
    async with maker() as db, db.begin():
        session = TrainingSession.model_validate(make_session(sid))
        db.add_all(watched_rows(session, root_ts=f"1.{sid[0]}"))


async def _lease(maker: Any, *sids: str) -> None:
    async with maker() as db, db.begin():
        await db.execute(
            update(WatchedSession)
            .where(WatchedSession.session_id.in_(sids))
            .values(lease_owner=OWNER, lease_until=db_now(60))
        )


@pytest.mark.parametrize("where", ["judge", "notifications"])
def test_any_exception_judging_or_telling_one_session_sets_only_it_aside(
    where: str, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = getattr(record, where)

    def hostile(*args: Any, **kwargs: Any) -> Any:
        if BAD in args[0]:  # the rows (judge) or the events (notifications) of BAD
            raise OverflowError("date value out of range")
        return real(*args, **kwargs)

    monkeypatch.setattr(record, where, hostile)

    async def work(maker: Any) -> None:
        for sid in (GOOD, BAD):
            await _watch(maker, sid)
        await _lease(maker, GOOD, BAD)
        part: dict[str, Fetched] = {
            BAD: RawSession.of(make_session(BAD, "STOPPING", step="7")),
            GOOD: RawSession.of(make_session(GOOD, "STOPPED")),
        }
        to_status, rows = await store_apart(
            maker, part, owner=OWNER, settings=SETTINGS, polled_at=None, interval=1.0
        )
        assert to_status == {"STOPPED": 1} and rows == 2  # GOOD's end and its final chart
        for _ in range(MAX_WRITE_FAILURES - 1):
            await _lease(maker, BAD)
            await store_apart(
                maker, {BAD: part[BAD]}, owner=OWNER, settings=SETTINGS, polled_at=None, interval=1
            )
        async with maker() as db:
            watched = {
                w.session_id: w for w in (await db.execute(select(WatchedSession))).scalars()
            }
            outbox = list((await db.execute(select(OutboxMessage))).scalars())
        assert watched[GOOD].last_status.endswith("STOPPED") and not watched[GOOD].active
        bad = watched[BAD]
        assert bad.last_status.endswith("RUNNING") and bad.transition_seq == 0
        assert bad.write_failures == MAX_WRITE_FAILURES and not bad.active
        assert bad.lease_owner is None and "OverflowError" in (bad.last_failure or "")
        told = sorted(m.kind for m in outbox)
        # GOOD's end (with its final chart), and BAD set aside once
        assert told == ["chart", "operator", "transition"], told
        assert BAD in json.dumps(next(m.payload for m in outbox if m.kind == "operator"))

    _run(db_url, work)


def test_a_failed_write_backs_the_session_off(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("unexpected")

    monkeypatch.setattr(record, "judge", broken)

    async def work(maker: Any) -> None:
        await _watch(maker, BAD)
        await _lease(maker, BAD)
        before = utcnow()
        await store_apart(
            maker,
            {BAD: RawSession.of(make_session(BAD))},
            owner=OWNER,
            settings=SETTINGS,
            polled_at=None,
            interval=1.0,
        )
        async with maker() as db:
            bad = (await db.execute(select(WatchedSession))).scalar_one()
        assert bad.write_failures == 1 and bad.active and bad.lease_owner is None
        assert bad.next_poll_at > before + timedelta(seconds=1)  # backed off past the interval

    _run(db_url, work)


# --- through the running bot ----------------------------------------------------------------


def test_a_never_timeout_or_an_edge_date_holds_back_no_other_sessions_news(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    """Three sessions still creating, one on a PENDING resource whose inactive timeout
    is int64 max and two created at the edges of time, share each poll batch with a
    session that stops: its STOPPED is told within a poll or two."""
    never = "d0000000-0000-4000-8000-00000000000d"
    early, late, plain = (f"{c * 8}-0000-4000-8000-000000000000" for c in "efa")
    resource = "7c3e4567-e89b-12d3-a456-426614174000"
    together.add_resource(resource, "PENDING", inactive_timeout=INT64_MAX)
    together.add(never, "CREATING", model_resources_id=resource)
    together.add(early, "CREATING", created_at=EARLIEST)
    together.add(late, "CREATING", created_at=LATEST)
    together.add(plain, "RUNNING")
    bot = start_bot(SPEND_WATCH="true", CREATING_ALERT_AFTER_MINUTES="0.05")
    roots = {sid: subscribe(bot, slack, "C123", sid) for sid in (never, early, late, plain)}
    # Once the never-timeout is stored from the first read, every poll judges it.
    wait_until(
        lambda: (
            "tick failed" in bot.log()
            or str(INT64_MAX) in str(query(db_url, "SELECT progress FROM watched_sessions"))
        ),
        what="the never-timeout read",
    )
    polled = together.requests_for(plain)
    wait_until(lambda: together.requests_for(plain) >= polled + 2, what="two more polls")
    together.set_status(plain, "STOPPED")
    polled = together.requests_for(plain)
    wait_until(lambda: notifications(slack, "C123", roots[plain]), what="the stop told")
    assert together.requests_for(plain) - polled <= 2  # told from the first poll or two
    assert "Stopped" in (notifications(slack, "C123", roots[plain])[0].text or "")
    # The early one has been creating since the year 1: told so, once.
    wait_until(lambda: notifications(slack, "C123", roots[early]), what="the slow start")
    assert "tick failed" not in bot.log()
    stored = query(
        db_url,
        "SELECT session_id, active, write_failures FROM watched_sessions ORDER BY session_id",
    )
    assert [(sid, bool(a), f) for sid, a, f in stored] == [
        (plain, False, 0),
        (never, True, 0),
        (early, True, 0),
        (late, True, 0),
    ]
    assert notifications(slack, "C123", roots[late]) == []  # created in the future: not slow
