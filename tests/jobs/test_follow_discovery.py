"""Where discovery learns who is live, against the Together-shaped server: the
roster of a pass another consumer made (no request of its own), one pass of
everyone, `created_by` passes where they save requests, and Together's 403 to
that filter (everyone is listed instead, from then on)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from bot.jobs.follow import DiscoveryState, live_sessions
from bot.jobs.follow_match import Wanted
from bot.settings.model import Settings
from bot.together.client import TogetherClient
from bot.together.list_pass import Lister
from bot.together.poll_plan import LIVE_STATUSES
from tests import together_fixtures
from tests.fakes import FakeTogether

fake = together_fixtures.fake
client = together_fixtures.client

ANA = Wanted(frozenset({"user_ana"}))
EVERYONE = Wanted(None)


def _lists(fake: FakeTogether) -> list[str]:
    with fake._lock:
        return [p for p in fake.paths if p.startswith("/v1/rl/training-sessions?")]


def _runtime(together: TogetherClient) -> Any:
    return SimpleNamespace(settings=Settings(_env_file=None), together=together)


def _add(fake: FakeTogether, n: int, by: str) -> list[str]:
    ids = [f"{by[-3:]}{i:05d}-0000-4000-8000-000000000000" for i in range(n)]
    for sid in ids:
        fake.add(sid, "RUNNING", created_by=by, checkpoints=0)
    return ids


async def test_the_roster_of_a_recent_pass_costs_no_request(
    fake: FakeTogether, client: TogetherClient
) -> None:
    ana = _add(fake, 3, "user_ana")
    lister = Lister(client)
    await lister.get(LIVE_STATUSES, max_pages=5, since=lister.clock())  # the poller's
    lister.forget(LIVE_STATUSES)
    before = len(_lists(fake))
    found = await live_sessions(
        _runtime(client), lister=lister, state=DiscoveryState(), wanted=[EVERYONE]
    )
    assert sorted(r.id for r in found.listed) == sorted(ana)
    assert {r.created_by for r in found.listed} == {"user_ana"}
    assert len(_lists(fake)) == before


async def test_created_by_passes_where_they_save_requests_and_a_403_falls_back(
    fake: FakeTogether, client: TogetherClient
) -> None:
    ana = _add(fake, 2, "user_ana")
    others = _add(fake, 250, "user_zed")  # three pages of everyone
    lister = Lister(client, clock=lambda: 0.0)
    rt = _runtime(client)
    state = DiscoveryState()
    first = await live_sessions(rt, lister=lister, state=state, wanted=[ANA])
    assert len(first.listed) == 252  # the project's size is not known yet: everyone
    assert not any("created_by" in p for p in _lists(fake))

    # an hour later (no recent roster): one filtered page instead of three
    lister.clock = lambda: 3600.0
    fake.reset_counts()
    with fake._lock:
        fake.paths.clear()
    found = await live_sessions(rt, lister=lister, state=state, wanted=[ANA])
    assert sorted(r.id for r in found.listed) == sorted(ana)
    assert [p for p in _lists(fake)] and all("created_by=user_ana" in p for p in _lists(fake))
    assert found.session(ana[0]) is not None  # the whole session, for the card

    # Together refuses the filter: everyone is listed instead, and from then on
    fake.fail(None, status=403, matching="created_by=", route="list")
    lister.clock = lambda: 7200.0
    refused = await live_sessions(rt, lister=lister, state=state, wanted=[ANA])
    assert state.filter_refused
    assert sorted(r.id for r in refused.listed) == sorted(ana + others)
    fake.clear_faults()
    with fake._lock:
        fake.paths.clear()
    lister.clock = lambda: 10_800.0
    await live_sessions(rt, lister=lister, state=state, wanted=[ANA])
    assert not any("created_by" in p for p in _lists(fake))


async def test_a_pass_cut_short_is_not_taken_for_everyone(
    fake: FakeTogether, client: TogetherClient
) -> None:
    ana = _add(fake, 150, "user_ana")  # two pages
    lister = Lister(client)
    await lister.get(LIVE_STATUSES, max_pages=1, since=lister.clock())  # the poller's, cut short
    found = await live_sessions(
        _runtime(client), lister=lister, state=DiscoveryState(), wanted=[EVERYONE]
    )
    assert sorted(r.id for r in found.listed) == sorted(ana)
