"""The spend watch's pure rules: what is stored of a resource read, the READY
time it adds up, the card's facts back from the column, and when the card is
worth a redraw."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from bot.alerts.resource_reader import ResourceReader
from bot.alerts.spend import SPEND_REDRAW_SECONDS, card_key, card_view_key, stored
from bot.rendering.root_card import CardExtras, card_facts, card_with_extras, facts
from bot.rendering.watch import watch_blocks
from bot.simulated.together import make_model_resource, make_session
from bot.together.client import TogetherClient
from bot.training.poll_progress import CardView, PollProgress
from bot.training.resources import CostEstimate, ModelResource
from bot.training.rules import Progress
from bot.training.sessions import TrainingSession

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
RID = "7c3e4567-e89b-12d3-a456-426614174000"
PRICE = CostEstimate(currency="USD", price_per_hour=12.0)


def resource(status: str = "READY", **over: object) -> ModelResource:
    return ModelResource.model_validate(make_model_resource(RID, status, now=NOW, **over))


def test_ready_time_adds_up_only_between_two_ready_reads() -> None:
    first = stored(None, (resource("CREATING"), PRICE), now=NOW)
    assert first is not None and first.ready_seconds == 0.0
    second = stored(first, (resource(), PRICE), now=NOW + timedelta(minutes=5))
    assert second is not None and second.ready_seconds == 0.0  # was not READY before
    third = stored(second, (resource(), PRICE), now=NOW + timedelta(minutes=35))
    assert third is not None and third.ready_seconds == 1800.0
    stopped = stored(third, (resource("STOPPED"), PRICE), now=NOW + timedelta(minutes=40))
    assert stopped is not None and stopped.ready_seconds == 1800.0


def test_a_failed_read_keeps_the_last_and_a_failed_price_keeps_the_old_price() -> None:
    first = stored(None, (resource(), PRICE), now=NOW)
    assert stored(first, None, now=NOW + timedelta(minutes=1)) == first
    later = stored(first, (resource(), None), now=NOW + timedelta(minutes=1))
    assert later is not None and later.price == PRICE.model_dump(mode="json")


def test_another_resource_starts_the_count_again() -> None:
    first = stored(None, (resource(), PRICE), now=NOW)
    other = ModelResource.model_validate(
        make_model_resource("8d3e4567-e89b-12d3-a456-426614174000", "READY", now=NOW)
    )
    later = stored(first, (other, PRICE), now=NOW + timedelta(hours=1))
    assert later is not None and later.ready_seconds == 0.0


def test_the_card_says_gpu_price_and_an_estimated_spend() -> None:
    first = stored(None, (resource(), PRICE), now=NOW)
    spend = stored(first, (resource(), PRICE), now=NOW + timedelta(hours=2))
    got = facts(CardView.of(PollProgress.model_construct(rate=3.0, spend=spend)))
    assert got.resource is not None and got.resource.id == RID
    assert got.ready_seconds == 7200.0
    shown = str(watch_blocks(got))
    assert got.resource.gpu_type and got.resource.gpu_type in shown
    assert "$12.00/h" in shown and "$24.00" in shown and "estimate" in shown
    assert "3 steps/min" in shown


def test_unreadable_columns_give_no_facts() -> None:
    for bad in (None, "x", {"spend": "x"}, {"spend": {"resource": 3, "price": []}}):
        got = facts(CardView.model_validate(bad))
        assert got.resource is None and got.price is None and got.ready_seconds is None
    assert card_key(None) is None and card_key(PollProgress.model_validate("x").spend) is None


def test_the_card_is_redrawn_on_a_change_it_shows_and_every_quarter_hour_ready() -> None:
    first = stored(None, (resource("PENDING"), PRICE), now=NOW)
    ready = stored(first, (resource(), PRICE), now=NOW + timedelta(minutes=1))
    assert card_key(first) != card_key(ready)
    # expires_at moves every minute while READY: not a redraw by itself
    moved = stored(
        ready,
        (resource(expires_at=(NOW + timedelta(hours=3)).isoformat()), PRICE),
        now=NOW + timedelta(minutes=2),
    )
    assert card_key(moved) == card_key(ready)
    step = timedelta(seconds=SPEND_REDRAW_SECONDS)
    later = stored(moved, (resource(), PRICE), now=NOW + timedelta(minutes=2) + step)
    assert card_key(later) != card_key(moved)


def test_the_watch_key_moves_with_the_shown_rate_or_resource_and_facts_carry_the_eta() -> None:
    def key(watch: object) -> str | None:
        return card_view_key(PollProgress.model_validate(watch))

    assert key({"rate": None}) is None and key(None) is None
    slow, fast = key({"rate": 10.0}), key({"rate": 10.2})
    assert slow is not None and slow == fast  # the same "10 steps/min"
    assert key({"rate": 12.0}) != slow
    spend = stored(None, (resource(), PRICE), now=NOW)
    assert spend is not None and key({"rate": 10.0, "spend": spend.dump()}) != slow
    eta = NOW + timedelta(minutes=10)
    got = facts(CardView.model_validate({"rate": 100.0, "target": 2000, "eta": eta.isoformat()}))
    assert got.target == 2000 and got.eta == eta
    shown = str(watch_blocks(got, step=1000))
    assert "step 2,000, ETA" in shown and "100 steps/min" in shown
    assert facts(CardView.model_validate({"target": True, "eta": "soon"})).target is None


def _watched(step: int, since: datetime, *, running: bool = True) -> CardView:
    """A `watched_sessions.progress` value: the step since `since`, 10 steps/min,
    on a READY resource."""
    progress = Progress(step=step, since=since, running=running, rate=10.0, anchored=True)
    spend = stored(None, (resource(), PRICE), now=NOW)
    return CardView.of(PollProgress.seen(progress, since, spend=spend))


def test_one_watch_state_gives_every_redraw_the_resource_rate_eta_and_stall() -> None:
    progress = _watched(1000, NOW)
    watch = CardExtras(progress, target=2000, stall_after=timedelta(minutes=15))
    got, step = card_facts(watch, now=NOW + timedelta(minutes=5))
    assert got.resource is not None and got.price == PRICE and got.rate == 10.0
    assert got.target == 2000 and got.eta == NOW + timedelta(minutes=5 + 100)
    assert got.stalled_since is None and step == 1000
    # Past the thread's threshold without a step: the stall flag, with its step.
    stalled, _ = card_facts(watch, now=NOW + timedelta(minutes=15))
    assert stalled.stalled_since == NOW
    # stall=off never flags; a session that stopped running has no ETA and no flag.
    off, _ = card_facts(CardExtras(progress, target=2000), now=NOW + timedelta(hours=1))
    assert off.stalled_since is None
    stopped, _ = card_facts(
        CardExtras(_watched(1000, NOW, running=False), target=2000, stall_after=timedelta(0)),
        now=NOW + timedelta(hours=1),
    )
    assert stopped.eta is None and stopped.stalled_since is None and stopped.target == 2000
    base = {"text": "x", "blocks": [{"type": "actions", "elements": []}]}
    shown = str(card_with_extras(base, watch, now=NOW + timedelta(minutes=20))["blocks"])
    assert "No progress" in shown and "step 1,000" in shown and "Ready (billing)" in shown
    assert "step 2,000, ETA" in shown and "$12.00/h" in shown


def test_a_watch_state_without_progress_still_shows_the_resource() -> None:
    spend = stored(None, (resource(), PRICE), now=NOW)
    view = CardView.of(PollProgress.model_construct(spend=spend))
    got, step = card_facts(CardExtras(view, target=50), now=NOW)
    assert got.resource is not None and got.target == 50 and got.eta is None and step is None
    nothing, _ = card_facts(CardExtras(CardView.model_validate(None)), now=NOW)
    assert nothing == facts(CardView.model_validate(None))


# --- ResourceReader: which resources a cycle reads, and how --------------------------------


class StubTogether:
    """Together's resource endpoints over a fixed set of live resources, counting requests."""

    def __init__(self, live: list[str], extra: tuple[str, ...] = ()) -> None:
        self.live = [resource_with(r) for r in live]
        self.known = {r.id: r for r in self.live} | {r: resource_with(r) for r in extra}
        self.gets: list[str] = []
        self.pages = 0
        self.page_rows = 100  # rows a page holds, whatever `limit` asks

    async def get_model_resource(self, resource_id: str, *, max_wait: float) -> ModelResource:
        self.gets.append(resource_id)
        return self.known[resource_id]

    async def list_model_resources(
        self, *, status: object, after: str | None, limit: int
    ) -> tuple[list[ModelResource], str | None]:
        self.pages += 1
        start = int(after) if after else 0
        end = start + min(limit, self.page_rows)
        return self.live[start:end], (str(end) if end < len(self.live) else None)

    async def estimate_cost(self, resource: ModelResource) -> CostEstimate:
        return PRICE


def resource_with(rid: str) -> ModelResource:
    return ModelResource.model_validate(make_model_resource(rid, "READY", now=NOW))


def rid(i: int) -> str:
    return f"7c3e4567-e89b-12d3-a456-{i:012d}"


def session_on(i: int, resource_id: str, status: str = "RUNNING") -> TrainingSession:
    return TrainingSession.model_validate(
        make_session(f"5a3e4567-e89b-12d3-a456-{i:012d}", status, model_resources_id=resource_id)
    )


def reader_over(stub: StubTogether, clock: list[float], refresh: float = 60.0) -> ResourceReader:
    return ResourceReader(
        cast(TogetherClient, stub), clock=lambda: clock[0], refresh_seconds=refresh
    )


def cycle(reader: ResourceReader, sessions: list[TrainingSession]) -> dict[str, Any]:
    reader.begin_cycle()
    return asyncio.run(reader.read(sessions))


def test_many_due_resources_are_read_with_live_pages_and_few_with_gets() -> None:
    stub = StubTogether([rid(i) for i in range(250)], extra=(rid(999),))
    clock = [1000.0]
    reader = reader_over(stub, clock)
    sessions = [session_on(i, rid(i)) for i in range(250)]
    # 250 due, nothing seen: a pass of live pages (3 pages, not 250 GETs).
    got = cycle(reader, sessions)
    assert len(got) == 250 and stub.pages == 3 and stub.gets == []
    # Within SPEND_REFRESH_SECONDS and no status changed: nothing is read.
    clock[0] += 30
    assert len(cycle(reader, sessions)) == 250 and stub.pages == 3 and stub.gets == []
    # One session changed status: its resource alone is due, one GET (1 < 3 pages).
    sessions[7] = session_on(7, rid(7), "STOPPING")
    cycle(reader, sessions)
    assert stub.gets == [rid(7)] and stub.pages == 3
    # Two due against 3 pages of live resources: GETs are cheaper.
    sessions[8], sessions[9] = session_on(8, rid(8), "STOPPING"), session_on(9, rid(9), "STOPPING")
    cycle(reader, sessions)
    assert sorted(stub.gets[1:]) == [rid(8), rid(9)] and stub.pages == 3
    # All due again after the refresh: pages again (3 < 250), once in the cycle.
    clock[0] += 61
    cycle(reader, sessions)
    assert stub.pages == 6 and len(stub.gets) == 3


def test_a_settled_resource_is_read_each_refresh_and_a_moving_one_each_minute() -> None:
    """SPEND_REFRESH_SECONDS (300 s) holds for a READY resource; a PENDING one,
    whose queue position the card shows, is read again after 60 s; a session's
    status change has its resource read at once either way."""
    ready, pending = rid(1), rid(2)
    stub = StubTogether([], extra=(ready, pending))
    stub.known[pending] = ModelResource.model_validate(
        make_model_resource(pending, "PENDING", now=NOW)
    )
    clock = [1000.0]
    reader = reader_over(stub, clock, refresh=300.0)
    sessions = [session_on(1, ready), session_on(2, pending, "CREATING")]
    assert len(cycle(reader, sessions)) == 2 and sorted(stub.gets) == [ready, pending]
    clock[0] += 30
    cycle(reader, sessions)
    assert len(stub.gets) == 2  # both fresh
    clock[0] += 31  # 61 s after the first read
    cycle(reader, sessions)
    assert stub.gets[2:] == [pending]
    sessions[0] = session_on(1, ready, "STOPPING")  # its session moved: read at once
    cycle(reader, sessions)
    assert stub.gets[3:] == [ready]
    clock[0] += 240  # 301 s after the first read, 240 after the last
    cycle(reader, sessions)
    assert stub.gets[4:] == [pending]  # READY read 240 s ago: still fresh
    clock[0] += 61
    cycle(reader, sessions)
    assert sorted(stub.gets[5:]) == [ready, pending]


def test_a_cycle_read_in_parts_reads_its_resources_with_one_pass_of_live_pages() -> None:
    """The poller hands the reader a cycle's sessions a page (100) at a time: the
    first part's pass of live pages serves the later parts too, in the first
    cycle as in later ones (a GET each for them cost 1,900 requests a refresh)."""
    n = 1000
    stub = StubTogether([rid(i) for i in range(n)], extra=(rid(99999),))
    clock = [1000.0]
    reader = reader_over(stub, clock)
    sessions = [session_on(i, rid(i)) for i in range(n)] + [session_on(n, rid(99999))]

    def in_parts() -> int:
        reader.begin_cycle()
        reader.expect(len(sessions))
        got = 0
        for k in range(0, len(sessions), 100):
            got += len(asyncio.run(reader.read(sessions[k : k + 100])))
        return got

    for _ in range(3):  # the first cycle, then two after each refresh
        assert in_parts() == n + 1
        clock[0] += 61
    # A pass of 10 pages a cycle; the one stopped resource (not live) asked for each time.
    assert stub.pages == 30 and stub.gets == [rid(99999)] * 3


def test_a_few_status_changes_in_a_cycle_read_in_parts_cost_a_get_each() -> None:
    """Two sessions of the first part changed status: their two resources are
    read with a GET each, not with a pass of live pages sized as if every part
    held as many (the bench's spend scenario spent 200 pages in 330 s so)."""
    n = 1000
    stub = StubTogether([rid(i) for i in range(n)])
    clock = [1000.0]
    reader = reader_over(stub, clock, refresh=300.0)
    sessions = [session_on(i, rid(i)) for i in range(n)]

    def in_parts() -> int:
        reader.begin_cycle()
        reader.expect(len(sessions))
        return sum(len(asyncio.run(reader.read(sessions[k : k + 100]))) for k in range(0, n, 100))

    assert in_parts() == n and stub.pages == 10 and stub.gets == []
    clock[0] += 30
    sessions[3], sessions[5] = session_on(3, rid(3), "STOPPING"), session_on(5, rid(5), "STOPPING")
    assert in_parts() == n
    assert stub.pages == 10 and sorted(stub.gets) == [rid(3), rid(5)]
    # Once the refresh is up, every part's resources are due again: one pass.
    clock[0] += 300
    assert in_parts() == n and stub.pages == 20 and len(stub.gets) == 2


def test_short_resource_pages_are_costed_at_the_rows_they_held() -> None:
    """Pages of 2 resources (a server may send fewer than asked): after one pass
    shows it, 6 resources on the last pages are cheaper to GET than to list again."""
    stub = StubTogether([rid(i) for i in range(20)])
    stub.page_rows = 2
    clock = [1000.0]
    reader = reader_over(stub, clock)
    sessions = [session_on(i, rid(i)) for i in range(14, 20)]
    assert len(cycle(reader, sessions)) == 6
    assert stub.pages == 5 and len(stub.gets) == 6  # a look, cut at what 6 GETs cost
    clock[0] += 61
    assert len(cycle(reader, sessions)) == 6
    assert stub.pages == 5 and len(stub.gets) == 12  # no second look: 6 pages > 6 GETs


def test_a_resource_absent_from_the_live_pages_is_read_with_a_get() -> None:
    stub = StubTogether([rid(i) for i in range(5)], extra=(rid(999),))
    clock = [1000.0]
    reader = reader_over(stub, clock)
    sessions = [session_on(i, rid(i)) for i in range(5)] + [session_on(9, rid(999))]
    got = cycle(reader, sessions)
    assert len(got) == 6
    assert stub.pages == 1 and stub.gets == [rid(999)]  # stopped: not listed, so asked
