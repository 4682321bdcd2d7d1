"""Leases of seconds: renewed while the work runs, taken at once from a replica
whose heartbeat stopped, handed back by a batch that failed; and a session a
command has just fetched counted as its poll.

In-process against each database, with the Together-shaped server for the
fetches and the Slack-shaped one for the posts; the process tests of the same
rules (kill -9, the delivery wake-up) are in tests/process/test_liveness.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

import pytest
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import insert, select, update
from sqlalchemy.exc import OperationalError

from bot.delivery.loop import Delivery, deliver_due
from bot.ops.metrics import Metrics
from bot.outbox.contract.rows import State, operator_row
from bot.outbox.queue import claim_due, insert_outbox
from bot.outbox.table import OutboxMessage
from bot.poll.cycle import poll_cycle
from bot.poll.from_command import poll_from_command, spacing
from bot.poll.leases import claim_due_sessions, release_all
from bot.settings.model import Settings
from bot.simulated import FakeSlack, FakeTogether, make_session
from bot.slack_web import SlackWeb
from bot.store.engine import make_engine, make_sessionmaker
from bot.store.heartbeats import heartbeat_every, held_for, renew_every, silent_after
from bot.store.tables import ReplicaSpend, WatchedSession, db_now
from bot.together.client import TogetherClient
from bot.training.sessions import TrainingSession
from tests import together_fixtures
from tests.support import watched_rows
from tests.support.deps import PollParts

fake = together_fixtures.fake
client = together_fixtures.client

T = TypeVar("T")
ME = "me"
A, B, C = (f"{c * 8}-0000-4000-8000-000000000000" for c in "abc")


def _settings(**kw: Any) -> Settings:
    return Settings(_env_file=None, poll_plan="get", spend_watch=False, **kw)


async def _with_db(db_url: str, work: Callable[[Any], Awaitable[T]]) -> T:
    engine = make_engine(db_url)
    try:
        return await work(make_sessionmaker(engine))
    finally:
        await engine.dispose()


async def _watch(maker: Any, *sids: str) -> None:
    async with maker() as db, db.begin():
        for n, sid in enumerate(sids):
            session = TrainingSession.model_validate(make_session(sid))
            rows = watched_rows(session, root_ts=f"1.{n}")
            rows[1].channel_id = f"C{n}"
            db.add_all(rows)


async def _lease(maker: Any, sid: str, owner: str, *, renewed_ago: float, lease: float) -> None:
    async with maker() as db, db.begin():
        await db.execute(
            update(WatchedSession)
            .where(WatchedSession.session_id == sid)
            .values(lease_owner=owner, lease_until=db_now(lease - renewed_ago))
        )


async def _heartbeat(maker: Any, owner: str, *, ago: float) -> None:
    async with maker() as db, db.begin():
        await db.execute(
            insert(ReplicaSpend).values(owner=owner, requests=0, others=0, updated_at=db_now(-ago))
        )


async def _leases(maker: Any) -> dict[str, str | None]:
    async with maker() as db:
        rows = await db.execute(select(WatchedSession.session_id, WatchedSession.lease_owner))
        return {r.session_id: r.lease_owner for r in rows}


async def _claimed(maker: Any, *sids: str) -> None:
    """Wait until this replica's cycle holds `sids` (its claim is done)."""
    for _ in range(200):
        if await _leases(maker) == dict.fromkeys(sids, ME):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the cycle never claimed its sessions")


# --- the sizes (pure) ------------------------------------------------------------------------


@pytest.mark.parametrize("lease", [2.0, 15.0, 120.0])
def test_the_lease_sizes_its_renewals_heartbeat_and_silence(lease: float) -> None:
    # two renewals may fail in a row before the lease runs out
    assert 2 * renew_every(lease) < lease
    # a holder is gone after two heartbeats and more missed, and before its lease ran out
    assert 2 * heartbeat_every(lease) < silent_after(lease) < lease
    assert heartbeat_every(lease) <= 5.0
    now = datetime(2026, 1, 1)
    # a lease renewed 4 s ago (15 s long) has waited 4 s; one just taken has waited nothing
    assert held_for(now + timedelta(seconds=11), now, 15.0) == 4.0
    assert held_for(now + timedelta(seconds=20), now, 15.0) == 0.0
    assert held_for(None, now, 15.0) == 0.0


def test_a_commands_fetch_keeps_the_interval_the_session_was_given() -> None:
    settings = _settings(poll_min_interval_seconds=5, poll_interval_seconds=60)
    polled = datetime(2026, 1, 1)
    assert spacing(polled + timedelta(seconds=20), polled, settings) == 20.0
    assert spacing(polled + timedelta(seconds=900), polled, settings) == 60.0  # a back-off
    assert spacing(polled, polled, settings) == 5.0
    assert spacing(polled, None, settings) == 5.0  # never polled: the shortest


# --- taking over a replica that stopped ------------------------------------------------------


async def test_a_lease_whose_holder_stopped_heartbeating_is_taken_at_once(db_url: str) -> None:
    """Three sessions leased for 4 s more (renewed 11 s ago): one to a replica
    silent for 10 s (gone), one to a live replica, one to a replica that never
    reported (trusted until its lease runs out). Only the first is taken, with how
    long it waited."""
    settings = _settings(lease_seconds=15)

    async def work(maker: Any) -> None:
        await _watch(maker, A, B, C)
        await _heartbeat(maker, "dead", ago=10)
        await _heartbeat(maker, "alive", ago=1)
        for sid, owner in ((A, "dead"), (B, "alive"), (C, "unknown")):
            await _lease(maker, sid, owner, renewed_ago=11, lease=15)
        claim = await claim_due_sessions(maker, owner=ME, settings=settings)
        assert claim.ids == [A]
        assert 10.0 <= claim.adopted[A] <= 13.0, claim.adopted
        assert await _leases(maker) == {A: ME, B: "alive", C: "unknown"}

        # the outbox alike: one row per channel, leased the same way
        async with maker() as db, db.begin():
            await insert_outbox(
                db, [operator_row(f"C{o}", o, "t", "d") for o in ("dead", "alive", "unknown")]
            )
            for o in ("dead", "alive", "unknown"):
                await db.execute(
                    update(OutboxMessage)
                    .where(OutboxMessage.channel_id == f"C{o}")
                    .values(lease_owner=o, lease_until=db_now(4))
                )
        # the live replica beats again (a loaded machine may have taken seconds since)
        async with maker() as db, db.begin():
            await db.execute(
                update(ReplicaSpend)
                .where(ReplicaSpend.owner == "alive")
                .values(updated_at=db_now(-1))
            )
        async with maker() as db, db.begin():
            rows = await claim_due(db, owner=ME, limit=10, lease_seconds=15, channel_gap=0)
        assert [(r.channel_id, r.lease_owner) for r in rows] == [("Cdead", "dead")]

    await _with_db(db_url, work)


async def test_a_silent_holder_keeps_the_rows_it_renewed_lately_not_its_sessions(
    db_url: str,
) -> None:
    """A replica whose heartbeat is 10 s old (killed, or its writes failed in a
    database blip) but which renewed a lease 2 s ago: its sessions are taken at
    once (a poll taken over costs a second read; its writes are fenced), but a row
    it renewed lately is not, so a post in flight is not made twice. Its row
    unrenewed for 11 s is taken."""
    settings = _settings(lease_seconds=15)

    async def work(maker: Any) -> None:
        await _watch(maker, A, B)
        await _heartbeat(maker, "lagging", ago=10)
        await _lease(maker, A, "lagging", renewed_ago=2, lease=15)
        await _lease(maker, B, "lagging", renewed_ago=11, lease=15)
        claim = await claim_due_sessions(maker, owner=ME, settings=settings)
        assert sorted(claim.ids) == sorted([A, B])
        assert await _leases(maker) == {A: ME, B: ME}

        async with maker() as db, db.begin():
            await insert_outbox(db, [operator_row(f"C{n}", str(n), "t", "d") for n in (2, 11)])
            for n in (2, 11):
                await db.execute(
                    update(OutboxMessage)
                    .where(OutboxMessage.channel_id == f"C{n}")
                    .values(lease_owner="lagging", lease_until=db_now(15 - n))
                )
        async with maker() as db, db.begin():
            rows = await claim_due(db, owner=ME, limit=10, lease_seconds=15, channel_gap=0)
        assert [r.channel_id for r in rows] == ["C11"]

    await _with_db(db_url, work)


async def test_a_session_of_a_holder_heartbeating_lately_is_not_taken(db_url: str) -> None:
    """The other side of the rule above: a holder whose heartbeat is 2 s old is
    alive, whatever its lease's age short of running out."""
    settings = _settings(lease_seconds=15)

    async def work(maker: Any) -> None:
        await _watch(maker, A)
        await _heartbeat(maker, "alive", ago=2)
        await _lease(maker, A, "alive", renewed_ago=12, lease=15)
        claim = await claim_due_sessions(maker, owner=ME, settings=settings)
        assert claim.ids == []
        assert await _leases(maker) == {A: "alive"}

    await _with_db(db_url, work)


async def test_a_claim_stamps_the_claimers_heartbeat(db_url: str) -> None:
    """After a database outage every heartbeat is stale. A replica that reconnects
    and claims keeps what it claimed: the next replica to reconnect does not take
    it as a silent replica's."""
    settings = _settings(lease_seconds=15)

    async def work(maker: Any) -> None:
        await _watch(maker, A)
        await _heartbeat(maker, ME, ago=10)
        await _heartbeat(maker, "other", ago=10)
        assert (await claim_due_sessions(maker, owner=ME, settings=settings)).ids == [A]
        async with maker() as db, db.begin():  # due again: only the lease protects it
            await db.execute(update(WatchedSession).values(next_poll_at=db_now(-1)))
        theirs = await claim_due_sessions(maker, owner="other", settings=settings)
        assert theirs.ids == []
        assert await _leases(maker) == {A: ME}

    await _with_db(db_url, work)


async def test_a_row_left_leased_to_this_replica_by_an_earlier_pass_is_taken_again(
    db_url: str,
) -> None:
    """A pass whose database went away could neither store a row's result nor
    hand the row back: the row is still leased to this replica for most of a
    lease. Its next pass takes it again at once (one replica's passes never
    overlap); another replica, which cannot know the pass ended, waits."""

    async def work(maker: Any) -> None:
        await _heartbeat(maker, ME, ago=0)
        async with maker() as db, db.begin():
            await insert_outbox(db, [operator_row("Cmine", "m", "t", "d")])
            await db.execute(update(OutboxMessage).values(lease_owner=ME, lease_until=db_now(14)))
        async with maker() as db, db.begin():
            theirs = await claim_due(db, owner="other", limit=10, lease_seconds=15, channel_gap=0)
        assert theirs == []
        async with maker() as db, db.begin():
            rows = await claim_due(db, owner=ME, limit=10, lease_seconds=15, channel_gap=0)
        assert [(r.channel_id, r.attempts) for r in rows] == [("Cmine", 1)]

    await _with_db(db_url, work)


# --- renewing the leases of long work --------------------------------------------------------


@pytest.mark.slow  # waits out two leases in real time
async def test_the_heartbeat_renews_a_poll_longer_than_its_lease(
    db_url: str, fake: FakeTogether, client: TogetherClient
) -> None:
    """A GET that takes 2.5 s on a 1.2 s lease: the lease is renewed while it runs,
    so another replica claiming meanwhile gets nothing, and the change is written."""
    settings = _settings(lease_seconds=1.2, poll_min_interval_seconds=1)
    fake.add(A)
    fake.set_status(A, "STOPPING")
    fake.session_latency[A] = 2.5

    async def work(maker: Any) -> None:
        await _watch(maker, A)
        cycle = asyncio.create_task(poll_cycle(PollParts(maker, client, settings, ME)))
        await _claimed(maker, A)
        await asyncio.sleep(1.6)  # past the lease as first claimed, the GET still running
        other = await claim_due_sessions(maker, owner="other", settings=settings)
        result = await cycle
        assert other.ids == [], "the lease ran out while the poll was working"
        assert result.renewals >= 3 and result.transitions == 1, result
        assert await _leases(maker) == {A: None}  # handed back with the result

    await _with_db(db_url, work)


@pytest.mark.slow  # waits out two leases in real time
async def test_the_heartbeat_renews_delivery_rows_waiting_their_turn(db_url: str) -> None:
    """Four rows sent one at a time, 1.5 s a post, on a 3 s lease: the last ones
    wait longer than the lease; renewed meanwhile (every second), every one is sent
    in one pass (without it, their fence would find the lease run out). A shorter
    lease left a loaded machine too little room between two renewals."""
    settings = _settings(lease_seconds=3.0, delivery_concurrency=1, channel_min_interval_seconds=0)
    metrics = Metrics()
    with FakeSlack() as slack:
        slack.method_latency["chat.postMessage"] = 1.5

        async def work(maker: Any) -> None:
            async with maker() as db, db.begin():
                await insert_outbox(
                    db, [operator_row(f"C{n}", str(n), "title", "detail") for n in range(4)]
                )
            web = SlackWeb(AsyncWebClient(base_url=slack.api_url, token="xoxb-test"))
            outcomes = await deliver_due(
                Delivery(
                    sessionmaker=maker, slack=web, settings=settings, owner=ME, metrics=metrics
                )
            )
            assert [o.state for o in outcomes] == [State.SENT] * 4, outcomes
            renewed = metrics.lease_renewals.labels(work="outbox")._value.get()
            assert renewed >= 2, renewed

        await _with_db(db_url, work)
        assert len(slack.successful_posts()) == 4


# --- a failed cycle hands back what it holds -------------------------------------------------


class _Blip:
    """A sessionmaker whose next `fail_next` transactions cannot reach the database
    (a connection cut), then recover: what a database blip does to a cycle."""

    def __init__(self, maker: Any) -> None:
        self.maker = maker
        self.fail_next = 0

    def __call__(self) -> Any:
        if self.fail_next:
            self.fail_next -= 1
            raise OperationalError("UPDATE", {}, ConnectionResetError("connection cut"))
        return self.maker()


async def test_a_row_whose_fence_cannot_reach_the_database_is_handed_back(db_url: str) -> None:
    """Two rows claimed; the database is away for the first row's fence: that row
    is not sent and its lease is handed back, so the next claim takes it at once
    rather than a lease later; the other row is sent as usual."""
    settings = _settings(lease_seconds=60, delivery_concurrency=1, channel_min_interval_seconds=0)
    with FakeSlack() as slack:

        async def work(maker: Any) -> None:
            async with maker() as db, db.begin():
                await insert_outbox(db, [operator_row(f"C{n}", str(n), "t", "d") for n in (1, 2)])
            calls = 0

            def blip() -> Any:  # the claim works; the first fence does not
                nonlocal calls
                calls += 1
                if calls == 2:
                    raise OperationalError("UPDATE", {}, ConnectionResetError("connection cut"))
                return maker()

            web = SlackWeb(AsyncWebClient(base_url=slack.api_url, token="xoxb-test"))
            outcomes = await deliver_due(
                Delivery(sessionmaker=blip, slack=web, settings=settings, owner=ME)
            )
            assert sorted(o.state for o in outcomes) == [State.PENDING, State.SENT]
            async with maker() as db, db.begin():
                again = await claim_due(
                    db, owner="other", limit=10, lease_seconds=60, channel_gap=0
                )
            assert [r.channel_id for r in again] == ["C1"]  # handed back, not held 60 s

        await _with_db(db_url, work)
        assert [p.channel for p in slack.successful_posts()] == ["C2"]


async def test_a_database_error_mid_cycle_hands_the_leases_back(
    db_url: str, fake: FakeTogether, client: TogetherClient
) -> None:
    """The write after the fetch cannot reach the database: the cycle fails, and
    its sessions' leases are handed back at once rather than held for a lease."""
    settings = _settings(lease_seconds=60)
    for sid in (A, B):
        fake.add(sid)
        fake.set_status(sid, "STOPPING")
        fake.session_latency[sid] = 0.5

    async def work(maker: Any) -> None:
        await _watch(maker, A, B)
        blip = _Blip(maker)
        cycle = asyncio.create_task(poll_cycle(PollParts(blip, client, settings, ME)))
        await _claimed(maker, A, B)
        blip.fail_next = 1  # the next transaction: the write of the fetched states
        with pytest.raises(OperationalError):
            await cycle
        assert await _leases(maker) == {A: None, B: None}
        retry = await claim_due_sessions(maker, owner="other", settings=settings)
        assert sorted(retry.ids) == [A, B]  # polled again at the next tick, not in 60 s

    await _with_db(db_url, work)


async def test_leases_a_failed_cycle_could_not_hand_back_are_handed_back_before_the_next(
    db_url: str, fake: FakeTogether, client: TogetherClient
) -> None:
    """The database is still away when the failed batch tries to hand back its
    leases: the replica's next tick hands back what it holds before claiming."""
    settings = _settings(lease_seconds=60)
    fake.add(A)

    async def work(maker: Any) -> None:
        await _watch(maker, A)
        blip = _Blip(maker)
        fake.session_latency[A] = 0.5
        cycle = asyncio.create_task(poll_cycle(PollParts(blip, client, settings, ME)))
        await _claimed(maker, A)
        blip.fail_next = 2  # the write, and the hand-back after it
        with pytest.raises(OperationalError):
            await cycle
        assert await _leases(maker) == {A: ME}
        assert await release_all(maker, owner=ME) == 1
        assert await _leases(maker) == {A: None}

    await _with_db(db_url, work)


# --- a command's fetch is the poll -----------------------------------------------------------


async def test_a_session_a_command_fetched_is_written_as_its_poll(db_url: str) -> None:
    """The change a command saw is told and the next poll is an interval away; a
    session a poll holds right now is left to that poll."""
    settings = _settings(poll_min_interval_seconds=5, poll_interval_seconds=60)
    seen = TrainingSession.model_validate(make_session(A, "STOPPING"))

    async def work(maker: Any) -> None:
        await _watch(maker, A)
        await _lease(maker, A, "poller", renewed_ago=0, lease=15)
        assert await poll_from_command(maker, seen, owner=ME, settings=settings) is None
        async with maker() as db, db.begin():
            await db.execute(update(WatchedSession).values(lease_owner=None, lease_until=None))
        async with maker() as db:
            before = (await db.execute(select(db_now()))).scalar_one()
        assert await poll_from_command(maker, seen, owner=ME, settings=settings) == 1
        async with maker() as db:
            row = (await db.execute(select(WatchedSession))).scalar_one()
            after = (await db.execute(select(db_now()))).scalar_one()
            told = (await db.execute(select(OutboxMessage))).scalars().all()
        assert row.last_status.endswith("STOPPING") and row.lease_owner is None
        # the next poll is POLL_MIN_INTERVAL_SECONDS (5) after the write, which came
        # between the two readings of the database's clock (however loaded the machine)
        slack = timedelta(milliseconds=600)
        assert row.next_poll_at - before >= timedelta(seconds=5) - slack
        assert row.next_poll_at - after <= timedelta(seconds=5) + slack
        assert [m.channel_id for m in told] == ["C0"]
        # not watched: nothing to write
        other = TrainingSession.model_validate(make_session(B))
        assert await poll_from_command(maker, other, owner=ME, settings=settings) is None

    await _with_db(db_url, work)
