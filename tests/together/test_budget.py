"""The Together request budget covers every request the bot sends:
the client books each request by kind and consumer, the poller sizes its
interval to what the others left. Pure rules and the client against the
Together-shaped server first, then the real process."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from types import SimpleNamespace

import pytest
from sqlalchemy import text, update

from bot.jobs.spend_exchange import Spend, deployment, exchange, forget
from bot.jobs.ticker import Ticker
from bot.ops.metrics import Metrics
from bot.poll.pace import GATE_HEADROOM, SIDE_WINDOW, Planner
from bot.settings.model import Settings
from bot.settings.timings import REPORT_STALE_SECONDS as STALE_SECONDS
from bot.simulated import FakeSlack, FakeTogether
from bot.store.engine import make_engine, make_sessionmaker
from bot.store.tables import ReplicaSpend, db_now
from bot.together.budget import COMMAND, POLL, Ledger, charged_to
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.together.gate import GRANT_SECONDS, SLICES
from bot.together.poll_plan import Plan, Seen, budget_interval
from bot.together.shares import Shares, Tier
from bot.training.resources import ModelResource
from tests import together_fixtures
from tests.support import BotFactory, BotProcess, query, wait_until

fake = together_fixtures.fake
client = together_fixtures.client

SID = "123e4567-e89b-12d3-a456-426614174000"


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_what_others_spent_is_taken_off_the_budget_before_the_interval_is_sized() -> None:
    kw = {"requests_per_minute": 120.0, "min_seconds": 5.0, "max_seconds": 60.0}
    assert budget_interval(20, **kw) == 10.0
    assert budget_interval(20, others_per_minute=60, **kw) == 20.0  # half left: twice as long
    assert budget_interval(5, others_per_minute=60, **kw) == 5.0  # never below the minimum
    assert budget_interval(20, others_per_minute=119, **kw) == 60.0  # never above the maximum
    assert budget_interval(20, others_per_minute=500, **kw) == 60.0  # nothing left
    assert budget_interval(2.5, others_per_minute=90, **kw) == 5.0  # a fraction (side cost)


def test_the_ledger_charges_each_request_to_its_consumer_over_a_sliding_window() -> None:
    clock = _Clock()
    seen: list[tuple[str, str]] = []
    ledger = Ledger(window=60, clock=clock, on_spend=lambda k, c: seen.append((k, c)))
    ledger.spend("get")  # nobody said: a person's command
    with charged_to(POLL):
        ledger.spend("list_page")
        ledger.spend("resource_get")
    with charged_to("watch_errors"):
        ledger.spend("list_page")
    assert seen == [
        ("get", COMMAND),
        ("list_page", POLL),
        ("resource_get", POLL),
        ("list_page", "watch_errors"),
    ]
    assert ledger.others_per_minute() == 2.0  # the poller's own are not "others"
    assert ledger.recent() == 4
    assert ledger.total(consumer=POLL) == 2
    assert ledger.total(consumer=POLL, kinds={"resource_get"}) == 1
    clock.now += 61  # out of the window, still in the totals
    assert ledger.others_per_minute() == 0.0 and ledger.recent() == 0
    assert ledger.total() == 4
    # a longer window (POLL_INTERVAL_SECONDS over a minute) is scaled to a minute
    long = Ledger(window=120, clock=clock)
    long.spend("get")
    long.spend("get")
    assert long.others_per_minute() == 1.0


def test_the_budget_is_the_deployments_the_other_replicas_non_poll_spend_is_taken_off() -> None:
    clock = _Clock()
    ledger = Ledger(window=60, clock=clock)
    with charged_to(POLL):
        for _ in range(6):
            ledger.spend("get")
    for _ in range(4):
        ledger.spend("get")  # commands
    local = Spend.of(ledger)
    assert local == Spend(requests=10.0, others=4.0)
    # two other live replicas: their polls count in the deployment's spend, and only their
    # commands and watches are taken off the budget (every replica's poller sizes a round
    # over all the watched sessions, claimed by one replica each: their polls are that round)
    remote = [Spend(requests=30, others=20), Spend(requests=5, others=0)]
    everyone = deployment(local, remote)
    assert everyone == Spend(requests=45.0, others=24.0)
    assert deployment(local, []) == local  # alone (or the database did not answer)

    settings = Settings(
        together_requests_per_minute=120, poll_min_interval_seconds=1, poll_interval_seconds=60
    )
    planner = Planner(clock=clock)
    # 20 GETs a round: every 10 s on 120 a minute with nobody else spending
    assert planner.interval_for(20, Plan.GET, settings) == 10.0
    planner.remote = sum(s.others for s in remote)
    # 4 of this replica's commands and 20 of the others' leave 96: every 12.5 s
    assert planner.interval_for(20, Plan.GET, settings, others=local.others) == 12.5
    assert planner.others == everyone.others == 24.0
    planner.remote = 200  # the others alone over the budget: the poller keeps its half
    assert planner.interval_for(20, Plan.GET, settings, others=local.others) == 20.0
    assert planner.others == 60.0
    # with no share kept, the others' spend takes it all: the longest interval
    no_share = settings.model_copy(update={"poll_budget_share": 0.0})
    assert planner.interval_for(20, Plan.GET, no_share, others=local.others) == 60.0


def test_a_burst_of_commands_never_stretches_the_round_past_the_pollers_share() -> None:
    """300 subscribes in a minute (300 GETs, over the whole budget of 120) while 500
    live sessions are listed in 5 pages a round: the poller keeps its half of the
    budget, so its round stays at what 60 requests a minute buy, not the longest
    interval; the commands themselves were never held back (the ledger booked them
    as they went)."""
    clock = _Clock()
    ledger = Ledger(window=60, clock=clock)
    settings = Settings(
        together_requests_per_minute=120, poll_min_interval_seconds=1, poll_interval_seconds=60
    )
    planner = Planner(clock=clock, seen=Seen(live=500, complete=True, missing=0.0, at=clock.now))
    calm = planner.interval_for(500, Plan.LIST, settings, others=ledger.others_per_minute())
    for _ in range(300):
        clock.now += 0.2
        ledger.spend("get")  # a person's subscribe
    assert ledger.others_per_minute() == 300.0
    burst = planner.interval_for(500, Plan.LIST, settings, others=ledger.others_per_minute())
    assert calm == 2.5  # 5 pages on 120 a minute
    assert burst == 5.0  # 5 pages on the poller's 60 a minute
    assert burst < settings.poll_interval_seconds
    assert planner.page_cap(settings) == 60  # a pass may still take what the share buys


async def test_replicas_report_their_spend_and_read_the_live_others(db_url: str) -> None:
    engine = make_engine(db_url)
    sessionmaker = make_sessionmaker(engine)
    try:
        assert await exchange(sessionmaker, owner="a", local=Spend(10, 4)) == []
        assert await exchange(sessionmaker, owner="b", local=Spend(7.2, 3)) == [Spend(10, 4)]
        # a report is replaced, not added to; the fraction is rounded up
        assert await exchange(sessionmaker, owner="a", local=Spend(12, 5)) == [Spend(8, 3)]
        # a replica that stopped reporting 31 s ago is ignored, then deleted
        async with engine.begin() as conn:
            await conn.execute(
                update(ReplicaSpend)
                .where(ReplicaSpend.owner == "b")
                .values(updated_at=db_now(-STALE_SECONDS - 1))
            )
        assert await exchange(sessionmaker, owner="a", local=Spend(12, 5)) == []
        async with engine.connect() as conn:
            owners = (await conn.execute(text("SELECT owner FROM replica_spend"))).all()
        assert [o for (o,) in owners] == ["a"]
        await forget(sessionmaker, owner="a")  # a replica that stops takes its row along
        assert await exchange(sessionmaker, owner="c", local=Spend(1, 1)) == []
    finally:
        await engine.dispose()


async def test_a_database_error_in_the_spend_exchange_leaves_the_local_count() -> None:
    class _Down:
        def __call__(self) -> None:
            raise ConnectionRefusedError("the database is down")

    ledger = Ledger()
    ledger.spend("get")  # a command
    rt = SimpleNamespace(
        settings=SimpleNamespace(spend_watch=False, spend_refresh_seconds=300.0),
        together=SimpleNamespace(ledger=ledger),
        lister=None,
        sessionmaker=_Down(),
        owner="a",
        metrics=Metrics(),
        deliver_soon=asyncio.Event(),
    )
    ticker = Ticker(rt)  # type: ignore[arg-type]
    ticker.work.poll_state.planner.remote = (
        40.0  # what the others reported before the database went away
    )
    await ticker.work.share_spend()  # no exception: the poller's tick is not held up
    assert ticker.work.poll_state.planner.remote == 0.0
    assert rt.metrics.poll_budget_others._value.get() == 1.0
    assert rt.metrics.budget_replicas._value.get() == 1.0


async def test_tasks_inherit_the_consumer_that_started_them() -> None:
    ledger = Ledger()

    async def work() -> None:
        ledger.spend("get")

    with charged_to(POLL):
        task = asyncio.create_task(work())  # e.g. a list pass the poller begins
    await task
    await asyncio.gather(work())  # outside: a command
    assert ledger.total(consumer=POLL) == 1 and ledger.total(consumer=COMMAND) == 1


async def test_the_client_books_every_kind_of_request_it_sends(
    fake: FakeTogether, client: TogetherClient
) -> None:
    fake.add(SID)
    session = await client.get_session(SID)
    await client.list_sessions(status="TRAINING_SESSION_STATUS_RUNNING")
    resource_id = session.model_resources_id
    assert resource_id is not None
    resource: ModelResource = await client.get_model_resource(resource_id)
    await client.list_model_resources(status="MODEL_RESOURCES_STATUS_READY")
    await client.estimate_cost(resource)
    await client.stop_session(SID)
    with contextlib.suppress(TogetherError):  # refused or not, it was sent and counted
        await client.stop_model_resource(resource_id)
    with charged_to(POLL):
        await client.get_session(SID)
    fake.fail(SID, status=503, times=1)
    with contextlib.suppress(TogetherError):  # a failed request was still spent
        await client.get_session(SID)
    ledger = client.ledger
    assert ledger.total() == fake.total_requests == 9
    kinds = ("get", "list_page", "stop", "resource_get", "resource_list_page")
    assert [ledger.total(kinds={k}) for k in kinds] == [3, 1, 1, 1, 1]
    assert ledger.total(kinds={"estimate_cost"}) == ledger.total(kinds={"resource_stop"}) == 1
    assert ledger.total(consumer=POLL) == 1
    assert ledger.others_per_minute() == 8.0


async def test_a_request_held_back_by_a_429_pause_is_not_spent(
    fake: FakeTogether, client: TogetherClient
) -> None:
    fake.add(SID)
    client.limiter.pause(30)
    try:
        await client.get_session(SID, max_wait=1)
    except TogetherError as exc:
        assert not exc.sent
    assert client.ledger.total() == 0 and fake.total_requests == 0


# --- the real process ---------------------------------------------------------------------------

WATCHED = [f"d{i:07d}-0000-0000-0000-000000000000" for i in range(2)]
BUDGET = 60  # requests a minute
BURST = 20  # `/rl-session <id>` cards: one GET each, charged to commands


def _subscribe(bot: BotProcess, slack: FakeSlack, sid: str, channel: str) -> None:
    token = f"sub-{sid}"
    bot.command(f"subscribe {sid}", response_url=slack.response_url(token), channel_id=channel)
    assert "Subscribed" in str(slack.wait_for_response(token))


def _spent(together: FakeTogether, start: float, seconds: float) -> int:
    with together._lock:
        return sum(1 for r in together.requests if start <= r.at < start + seconds)


# The first test watches a whole budget window: counted over WINDOW seconds instead of
# a minute (TOGETHER_BUDGET_WINDOW_SECONDS, test-only) with a per-minute budget scaled so
# that a window holds BUDGET requests, as a minute did. Every count below is per window
# and every interval a third of the minute's.
WINDOW = 20
SCALE = 60 / WINDOW  # a window's requests, per minute


def _interval(round_requests: int, others: int) -> float:
    """The poll interval a round of `round_requests` gets when others spent `others`
    in the window: the rest of the window's budget, shared out over the window."""
    return round_requests * WINDOW / (BUDGET - others)


#: the tiers a test bot runs (no error watch; the subscribed-idle watch is on by default)
TEST_TIERS = frozenset({Tier.PEOPLE, Tier.POLL, Tier.FOLLOW, Tier.IDLE})


def _slice_shares(per_minute: float, window: float) -> Shares:
    """The shares of a slice of the budget's `window`, as the bot keeps them."""
    return Shares.of(per_minute * window / SLICES / 60.0, TEST_TIERS)


def _interval(round_requests: int, per_slice: int, window: float) -> float:
    """The interval a round gets when the poll may plan on `per_slice` requests a slice."""
    books = window / SLICES + GRANT_SECONDS
    return round_requests * books / (per_slice * GATE_HEADROOM)


@pytest.mark.backend_independent("one replica: the books' lock is not what is tested")
def test_people_beyond_their_floor_stretch_the_poll_interval_within_the_budget(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    for sid in WATCHED:
        together.add(sid)
    shares = _slice_shares(BUDGET * SCALE, WINDOW)
    bot = start_bot(
        POLL_PLAN="get",
        POLL_INTERVAL_SECONDS=str(WINDOW),
        POLL_MIN_INTERVAL_SECONDS="0.5",
        TOGETHER_REQUESTS_PER_MINUTE=str(BUDGET * SCALE),
        TOGETHER_BUDGET_WINDOW_SECONDS=str(WINDOW),
    )
    for i, sid in enumerate(WATCHED):
        _subscribe(bot, slack, sid, f"C{i}")
    # 2 GETs a round in what the other tiers' floors leave the poll of a slice (a
    # quarter of the window): 0.96 s; two subscribes stretch it little
    calm = _interval(len(WATCHED), shares.poll_capacity({}), WINDOW)
    wait_until(
        lambda: (bot.metric("rlbot_poll_interval_seconds") or 99) < calm * 1.2,
        what=f"the poller at about {calm:.2f} s",
    )
    with together._lock:
        start = together.requests[-1].at
    for n in range(BURST):
        token = f"card{n}"
        bot.command(f"{WATCHED[n % 2]}", response_url=slack.response_url(token), channel_id="C9")
        slack.wait_for_response(token)
    commands = '{consumer="command",kind="get"}'
    assert bot.metric(f"rlbot_together_requests_spent_total{commands}") == BURST + len(WATCHED)
    # people's requests beyond their floor in a slice: the poll gives back the free part,
    # down to its own floor at the most (1.65 s a round), once the heartbeat booked them
    stretched_to = _interval(len(WATCHED), shares.floor(Tier.POLL), WINDOW)
    stretched = wait_until(
        lambda: (v := bot.metric("rlbot_poll_interval_seconds")) and v > calm * 1.3 and v,
        what="the interval stretched",
    )
    assert stretched <= stretched_to * 1.1, (stretched, stretched_to)
    # Over the window from the first card on, the bot stays within the budget but for
    # what people asked beyond their floor (give or take the one round a window's
    # edge can hold beyond the rate)
    wait_until(
        lambda: together.requests[-1].at > start + WINDOW + 1,
        timeout=WINDOW + 30,
        what="a window",
    )
    total = _spent(together, start, WINDOW)
    beyond = max(0, BURST - SLICES * shares.floor(Tier.PEOPLE))
    assert BURST + 10 <= total <= BUDGET + beyond + len(WATCHED), total
    spent = bot.metric('rlbot_together_requests_spent_total{consumer="poll",kind="get"}')
    assert spent is not None and spent >= 20


def test_commands_on_one_replica_are_in_the_books_of_another(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    """TOGETHER_REQUESTS_PER_MINUTE is the deployment's: the cards asked of replica B
    are booked in the books A's poll takes its share from."""
    if db_url.startswith("sqlite"):
        pytest.skip("replicas share a PostgreSQL database")
    for sid in WATCHED:
        together.add(sid)
    shares = _slice_shares(BUDGET, 60)
    budget = {"POLL_PLAN": "get", "TOGETHER_REQUESTS_PER_MINUTE": str(BUDGET)}
    # A polls: 2 GETs a round in 44 a minute, every 2.7 s (ticks of 0.25 s). B ticks every
    # 5 s (a minimum interval of 20 s), so A claims nearly every poll and its interval
    # gauge follows the budget.
    a = start_bot(
        REPLICA_ID="a", POLL_INTERVAL_SECONDS="20", POLL_MIN_INTERVAL_SECONDS="0.5", **budget
    )
    b = start_bot(
        REPLICA_ID="b", POLL_INTERVAL_SECONDS="20", POLL_MIN_INTERVAL_SECONDS="20", **budget
    )
    for i, sid in enumerate(WATCHED):
        _subscribe(a, slack, sid, f"C{i}")
    calm = _interval(len(WATCHED), shares.poll_capacity({}), 60)
    wait_until(
        lambda: (a.metric("rlbot_poll_interval_seconds") or 99) < calm * 1.15,
        timeout=30,
        what=f"A polling at about {calm:.1f} s",
    )
    wait_until(lambda: a.metric("rlbot_budget_replicas") == 2, timeout=30, what="A counts B")
    # B's cards, asked one after another for about half a minute while A polls: they
    # reach A's books within a heartbeat or two
    burst = 40

    def cards() -> None:
        for n in range(burst):
            token = f"card{n}"
            b.command(f"{WATCHED[n % 2]}", response_url=slack.response_url(token), channel_id="C9")
            slack.wait_for_response(token)
            time.sleep(0.5)

    asking = threading.Thread(target=cards)
    asking.start()
    try:
        people = wait_until(
            lambda: (v := a.metric('rlbot_budget_tier_spent{tier="people"}')) and v >= 5 and v,
            timeout=60,
            what="B's commands in A's books",
        )
    finally:
        asking.join()
    assert people <= burst + 3 * len(WATCHED) + 2, people
    # A sent no command but its own two subscriptions: what A's books hold is B's spend
    commands = a.metric('rlbot_together_requests_spent_total{consumer="command",kind="get"}')
    assert commands == len(WATCHED), commands
    spent_b = b.metric('rlbot_together_requests_spent_total{consumer="command",kind="get"}')
    assert spent_b == burst, spent_b
    assert ("b",) in query(db_url, "SELECT owner FROM replica_spend")
    assert ("b",) in query(
        db_url, "SELECT DISTINCT owner FROM together_grants WHERE tier = 'people'"
    )


def test_the_side_cost_of_a_round_is_averaged_over_recent_cycles() -> None:
    """The spend watch reads resources in one cycle and then none for a while: the
    round's side cost is their average, not the last cycle's (which swung 10 → 0)."""
    now = [0.0]
    planner = Planner(clock=lambda: now[0])
    planner.note_spend(10, claimed=20, watched=20)
    assert planner.side == 10
    for _ in range(4):
        now[0] += 10
        planner.note_spend(0, claimed=20, watched=20)
    assert planner.side == pytest.approx(2.0)  # 10 requests over five rounds
    # Half-round cycles (20 of 40 watched) count as half a round each.
    planner.note_spend(0, claimed=20, watched=40)
    assert planner.side == pytest.approx(10 * 40 / 120)
    # Past the window the burst is forgotten.
    now[0] += SIDE_WINDOW + 1
    planner.note_spend(0, claimed=20, watched=20)
    assert planner.side == 0


def test_ticks_that_claim_nothing_leave_the_side_cost_as_it_was() -> None:
    """The poll job ticks every few seconds and most ticks find nothing due: they
    are no round. Counted, they made the average 0 at the next tick (seen in the
    bench: 20 resource pages a refresh never stretched the interval)."""
    now = [0.0]
    planner = Planner(clock=lambda: now[0])
    planner.note_spend(21, claimed=2000, watched=2000)
    for _ in range(3):
        now[0] += 2.5
        planner.note_spend(0, claimed=0, watched=0)
    assert planner.side == 21
    now[0] += 2.5
    planner.note_spend(0, claimed=2000, watched=2000)
    assert planner.side == pytest.approx(10.5)


def test_what_the_poller_measured_itself_spend_stretches_its_interval() -> None:
    """A plan estimated at one page a round (a list that looked short) that was
    measured at 99 pages a round is sized by the 99: 49.5 s at 120 a minute, not
    the 5 s the estimate allowed."""
    settings = Settings(
        _env_file=None,
        together_requests_per_minute=120,
        poll_interval_seconds=60,
        poll_min_interval_seconds=5,
    )
    now = [0.0]
    planner = Planner(clock=lambda: now[0])
    planner.seen = Seen(live=150, complete=False, missing=0.0, at=0.0)
    assert planner.interval_for(100, Plan.LIST, settings) == 5.0  # the estimate alone
    planner.note_spend(0, planned=99, claimed=100, watched=100)
    assert planner.interval_for(100, Plan.LIST, settings) == pytest.approx(49.5)
    # A pass may not take more pages than the budget leaves a round at the longest interval.
    assert planner.page_cap(settings) == 120
    planner.interval_for(100, Plan.LIST, settings, others=60)
    assert planner.page_cap(settings) == 60
