"""One list pass serves every consumer: the process's `Lister` hands a
fresh complete pass of the same or more statuses to `ls`, and an ERROR pass
another consumer made to the poller; `ls` filters a superset. Fast: the bot's
client against the Together-shaped server, no bot process."""

from __future__ import annotations

import asyncio

from bot.commands.ls import fetch_page, from_pass
from bot.commands.ls_query import ListQuery
from bot.simulated import FakeTogether
from bot.together.client import TogetherClient
from bot.together.list_pass import SHARE_SECONDS, Lister
from bot.together.poll_plan import ERROR_STATUSES, LIVE_STATUSES
from tests import together_fixtures

fake = together_fixtures.fake
client = together_fixtures.client

RUNNING = "TRAINING_SESSION_STATUS_RUNNING"


def _ids(n: int, first: str) -> list[str]:
    return [f"{first}{i:07d}-0000-0000-0000-000000000000" for i in range(n)]


def _list_requests(fake: FakeTogether) -> int:
    with fake._lock:
        return sum(1 for p in fake.paths if p.startswith("/v1/rl/training-sessions?"))


async def test_ls_takes_a_fresh_complete_pass_of_more_statuses_and_lists_nothing(
    fake: FakeTogether, client: TogetherClient
) -> None:
    running, creating = _ids(3, "a"), _ids(2, "b")
    for sid in running:
        fake.add(sid)
    for sid in creating:
        fake.add(sid, status="CREATING")
    fake.add(_ids(1, "c")[0], created_by="someone_else")
    lister = Lister(client)
    await lister.get(LIVE_STATUSES, max_pages=10, since=lister.clock())
    before = _list_requests(fake)
    page = await fetch_page(client, ListQuery("running"), created_by=None, lister=lister)
    assert _list_requests(fake) == before  # saved: the poller's live pass covered it
    assert [r.session.id for r in page.rows] == [*running, _ids(1, "c")[0]]
    assert page.after is None
    mine = await fetch_page(client, ListQuery("all"), created_by=None, lister=lister)
    assert _list_requests(fake) == before + 1  # "all" is more than the live statuses
    assert len(mine.rows) == 6
    theirs = await fetch_page(
        client, ListQuery("running", who="U2"), created_by=["someone_else"], lister=lister
    )
    assert [r.session.id for r in theirs.rows] == _ids(1, "c")
    assert _list_requests(fake) == before + 1  # the creator filtered from the pass too


async def test_a_stale_cut_short_or_narrower_pass_is_not_shared(
    fake: FakeTogether, client: TogetherClient
) -> None:
    for sid in _ids(3, "a"):
        fake.add(sid)
    clock = [1000.0]
    lister = Lister(client, clock=lambda: clock[0])
    await lister.get(LIVE_STATUSES, max_pages=10, since=clock[0])
    assert await lister.covering([RUNNING], since=clock[0]) is not None
    assert await lister.covering([RUNNING], since=clock[0] + 0.1) is None  # begun before
    assert await lister.covering(ERROR_STATUSES, since=0) is None  # not listed
    assert await lister.covering([], since=0) is None  # every status: nothing covers it
    clock[0] += SHARE_SECONDS + 1
    lister.forget(LIVE_STATUSES)  # begun longer ago than SHARE_SECONDS: dropped now
    assert await lister.covering([RUNNING], since=0) is None
    await lister.get([RUNNING], max_pages=10, since=clock[0])
    assert await lister.covering([RUNNING], since=0) is not None  # the same statuses
    assert await lister.covering(LIVE_STATUSES, since=0) is None  # narrower than asked
    fake.fail(None, status=503, times=1)
    failed = await lister.get(LIVE_STATUSES, max_pages=10, since=clock[0])
    assert failed.error is not None
    assert await lister.covering(LIVE_STATUSES, since=clock[0]) is None  # never a failed one


async def test_the_poller_forgets_its_pass_only_after_others_could_share_it(
    fake: FakeTogether, client: TogetherClient
) -> None:
    fake.add(_ids(1, "a")[0])
    lister = Lister(client)
    await lister.get(LIVE_STATUSES, max_pages=10, since=lister.clock())
    lister.forget(LIVE_STATUSES)  # end of a cycle: kept for SHARE_SECONDS after it began
    assert await lister.covering([RUNNING], since=lister.clock() - SHARE_SECONDS) is not None


async def test_held_waits_for_a_running_pass_of_exactly_those_statuses(
    fake: FakeTogether, client: TogetherClient
) -> None:
    errored = _ids(2, "e")
    for sid in errored:
        fake.add(sid, status="ERROR")
    lister = Lister(client)
    start = lister.clock()
    running = asyncio.create_task(lister.get(ERROR_STATUSES, max_pages=5, since=start))
    await asyncio.sleep(0)  # the pass has begun
    held = await lister.held(ERROR_STATUSES, since=start)
    assert held is not None and all(sid in held for sid in errored)
    assert (await running) is held
    assert _list_requests(fake) == 1
    assert await lister.held(ERROR_STATUSES, since=lister.clock() + 1) is None


def test_from_pass_gives_up_when_the_answer_needs_a_second_page() -> None:
    from bot.simulated import make_session
    from bot.together.list_pass import ListPass
    from bot.training.sessions import RawSession

    listed = ListPass(complete=True)
    for sid in _ids(101, "a"):
        listed.add(RawSession.of(make_session(sid)))
    assert from_pass(listed, ListQuery("running"), None) is None
    assert from_pass(listed, ListQuery("creating"), None) == []
    few = from_pass(listed, ListQuery("running", model="other/model"), None)
    assert few == []
