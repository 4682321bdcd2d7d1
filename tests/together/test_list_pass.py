"""A list pass asks for the next page as soon as it knows the cursor, and parses and
hands over a page while the next one loads: a pass of n pages takes about n
round trips, not n round trips plus n parses. No extra page is ever asked for.
Fast: the bot's client against the Together-shaped server, no bot process."""

from __future__ import annotations

import asyncio
import time

import httpx

from bot.poll.fetch import Fetched, Listing, after_the_pass
from bot.settings.model import Settings
from bot.together.client import TogetherClient
from bot.together.list_pass import SEND_WAIT, Lister, ListPass, list_pass
from bot.together.poll_plan import LIVE_STATUSES, Seen
from bot.training.sessions import RawSession
from tests import together_fixtures
from tests.fakes import FakeTogether, make_session

fake = together_fixtures.fake
client = together_fixtures.client


def _list_requests(fake: FakeTogether) -> int:
    with fake._lock:
        return sum(1 for p in fake.paths if p.startswith("/v1/rl/training-sessions?"))


def _add(fake: FakeTogether, n: int) -> None:
    for i in range(n):
        fake.add(f"p{i:07d}-0000-0000-0000-000000000000")


async def test_the_next_page_loads_while_this_one_is_handed_over(
    fake: FakeTogether, client: TogetherClient
) -> None:
    _add(fake, 250)  # three pages
    asked_while_handed: list[int] = []

    async def on_page(page: list[RawSession]) -> None:
        await asyncio.sleep(0.3)  # a slow consumer: the next page is already asked for
        asked_while_handed.append(_list_requests(fake))

    listed = await list_pass(client, LIVE_STATUSES, max_pages=10, on_page=on_page)
    assert listed.complete and listed.pages == 3 and len(listed) == 250
    assert asked_while_handed == [2, 3, 3]  # none after the last page
    assert _list_requests(fake) == 3


async def test_a_page_limit_asks_for_no_page_past_it(
    fake: FakeTogether, client: TogetherClient
) -> None:
    _add(fake, 250)
    listed = await list_pass(client, LIVE_STATUSES, max_pages=2)
    assert (listed.pages, listed.complete, len(listed)) == (2, False, 200)
    await asyncio.sleep(0.2)
    assert _list_requests(fake) == 2
    assert (await list_pass(client, LIVE_STATUSES, max_pages=0)).pages == 0
    assert _list_requests(fake) == 2


async def test_a_failed_next_page_stops_the_pass_after_the_pages_read(
    fake: FakeTogether, client: TogetherClient
) -> None:
    _add(fake, 250)
    seen: list[int] = []

    async def on_page(page: list[RawSession]) -> None:
        seen.append(len(page))

    def fail_the_next(target: str) -> None:
        # Set while the first page is served: the next page's request is sent
        # before the first is handed over, so on_page would be too late.
        if "after=" not in target:
            fake.fail(None, status=503, times=1)

    fake.on_list_page = fail_the_next
    try:
        listed = await list_pass(client, LIVE_STATUSES, max_pages=10, on_page=on_page)
    finally:
        fake.on_list_page = None
    assert listed.error is not None and listed.error.kind == "unavailable"
    assert (listed.pages, listed.complete, len(listed)) == (1, False, 100)
    assert seen == [100]


async def test_the_next_pages_request_is_known_to_have_left_long_before_its_answer(
    fake: FakeTogether, client: TogetherClient
) -> None:
    """What lets a pass read a page only once the next request is on its way."""
    _add(fake, 1)
    fake.latency = 1.0
    try:
        sent = asyncio.Event()
        loading = asyncio.create_task(client.list_session_rows(status=LIVE_STATUSES, sent=sent))
        await asyncio.wait_for(sent.wait(), timeout=0.8)
        assert not loading.done()
        rows, cursor = await loading
        assert [r["id"] for r in rows] == ["p0000000-0000-0000-0000-000000000000"]
        assert cursor is None
    finally:
        fake.latency = 0.0


async def test_a_transport_that_never_says_a_request_left_still_pages_through() -> None:
    """A transport without httpcore's trace (here httpx's MockTransport): each page
    waits at most SEND_WAIT for word that never comes, and nothing is lost."""
    ids = [f"m{i:07d}-0000-0000-0000-000000000000" for i in range(3)]

    def answer(request: httpx.Request) -> httpx.Response:
        at = int(request.url.params.get("after") or 0)
        more = at + 1 < len(ids)
        meta = {"has_more": more, "limit": 1, "next_cursor": str(at + 1) if more else None}
        return httpx.Response(200, json={"data": [make_session(ids[at])], "meta": meta})

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        together = TogetherClient(http, base_url="http://together.test/v1", api_key="k")
        started = time.monotonic()
        listed = await list_pass(together, LIVE_STATUSES, max_pages=10)
    assert listed.complete and listed.pages == 3
    assert [listed.session(i).id for i in ids] == ids
    assert time.monotonic() - started < 10 * SEND_WAIT + 2.0


async def test_the_sessions_a_pass_cut_short_did_not_show_are_each_asked_for(
    fake: FakeTogether, client: TogetherClient
) -> None:
    """A pass that stopped at its page limit (a list that never ends, a page that
    failed) says nothing of the due sessions it did not reach: not known yet, so
    each is asked for by its own GET and learnt this cycle, none counted failed."""
    fake.add("a0000000-0000-0000-0000-000000000001")
    fake.add("b0000000-0000-0000-0000-000000000002", status="STOPPED")
    written: dict[str, Fetched] = {}

    async def write(part: dict[str, Fetched]) -> None:
        written.update(part)

    cut = ListPass(pages=3, complete=False, at=1.0)
    rest = ["a0000000-0000-0000-0000-000000000001", "b0000000-0000-0000-0000-000000000002"]
    listing = Listing(listed=cut, rest=rest, seen=Seen(0, False, 0.0, 1.0))
    learnt = await after_the_pass(
        client,
        None,  # type: ignore[arg-type]  # no error watch's pages looked at after a cut pass
        listing,
        previous=None,
        settings=Settings(_env_file=None),
        write=write,
    )
    assert learnt.gets == 2 and learnt.from_error_pages == 0
    assert {sid: r.head.status for sid, r in written.items() if isinstance(r, RawSession)} == {
        rest[0]: "TRAINING_SESSION_STATUS_RUNNING",
        rest[1]: "TRAINING_SESSION_STATUS_STOPPED",
    }


async def test_a_pass_knows_how_many_rows_the_server_sends_a_page(
    fake: FakeTogether, client: TogetherClient
) -> None:
    """Asked for 100 rows, a server may send 2: a page's size is what came on the
    pages followed by another (the last holds what is left)."""
    _add(fake, 7)
    fake.page_rows = 2
    try:
        listed = await list_pass(client, LIVE_STATUSES, max_pages=10)
        cut = await list_pass(client, LIVE_STATUSES, max_pages=2)
    finally:
        fake.page_rows = None
    assert (listed.pages, listed.complete, len(listed), listed.rows_per_page()) == (4, True, 7, 2.0)
    assert (cut.pages, cut.complete, cut.rows_per_page()) == (2, False, 2.0)
    one = await list_pass(client, LIVE_STATUSES, max_pages=10)
    assert (one.pages, one.complete, one.rows_per_page()) == (1, True, None)


async def test_the_lister_keeps_the_rows_a_page_held_for_later_estimates(
    fake: FakeTogether, client: TogetherClient
) -> None:
    _add(fake, 7)
    lister = Lister(client)
    assert lister.last_per_page(LIVE_STATUSES) == 100  # nothing seen: what is asked
    fake.page_rows = 3
    try:
        await lister.get(LIVE_STATUSES, max_pages=10, since=lister.clock())
    finally:
        fake.page_rows = None
    assert lister.last_per_page(LIVE_STATUSES) == 3
    await lister.get(LIVE_STATUSES, max_pages=10, since=lister.clock() + 1)  # one page of 7
    assert lister.last_per_page(LIVE_STATUSES) == 3  # one page says nothing of a page's size
