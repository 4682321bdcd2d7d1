"""In the real process: the poller learning states from list pages
(`POLL_PLAN=list`), what a session ending between two pages and a failed page
do, and the Together request budget stretching the poll interval."""

from __future__ import annotations

import threading
import time

import pytest

from bot.poll.pace import GATE_HEADROOM
from bot.simulated import FakeSlack, FakeTogether
from bot.together.gate import GRANT_SECONDS, SLICES
from bot.together.shares import Shares, Tier
from tests.support import BotFactory, BotProcess, query, wait_until

FIRST = "a0000000-0000-0000-0000-000000000001"  # on page 1
SECOND = "b0000000-0000-0000-0000-000000000002"  # on page 2
FILLER = 150  # unwatched live sessions between them: pages of 100
LIST_PATH = "/v1/rl/training-sessions?"


def _project(together: FakeTogether) -> None:
    together.add(FIRST, display_name="first-run")
    for i in range(FILLER):
        together.add(f"f{i:07d}-0000-0000-0000-000000000000", checkpoints=0)
    together.add(SECOND, display_name="second-run")


def _subscribe(bot: BotProcess, slack: FakeSlack, sid: str, channel: str) -> str:
    token = f"sub-{sid}"
    bot.command(f"subscribe {sid}", response_url=slack.response_url(token), channel_id=channel)
    assert "Subscribed" in str(slack.wait_for_response(token))
    return next(c.ts for c in slack.successful_posts(channel) if c.thread_ts is None and c.ts)


def _thread(slack: FakeSlack, channel: str, root: str) -> list[str]:
    return [c.text or "" for c in slack.successful_posts(channel) if c.thread_ts == root]


def _first_pages(together: FakeTogether) -> int:
    with together._lock:
        return sum(1 for p in together.paths if p.startswith(LIST_PATH) and "after=" not in p)


def _list_passes(together: FakeTogether, n: int) -> None:
    start = _first_pages(together)
    wait_until(lambda: _first_pages(together) >= start + n, timeout=20, what=f"{n} list passes")


def _two_watched(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, passes: int
) -> tuple[BotProcess, str, str]:
    """The list plan on the project, FIRST subscribed in C1 and SECOND in C2, after `passes`
    list passes: the bot and the two root messages."""
    _project(together)
    bot = start_bot(POLL_PLAN="list")
    first = _subscribe(bot, slack, FIRST, "C1")
    second = _subscribe(bot, slack, SECOND, "C2")
    _list_passes(together, passes)
    return bot, first, second


class _BetweenPages:
    """Runs `act` once, right after the first page of the next list pass is served."""

    def __init__(self, together: FakeTogether, act: object) -> None:
        self.done = threading.Event()
        self._act = act
        together.on_list_page = self

    def __call__(self, target: str) -> None:
        if not self.done.is_set() and "after=" not in target:
            self.done.set()
            self._act()  # type: ignore[operator]


@pytest.mark.backend_independent(
    "the poll plan; its claims on both backends are tested with replicas"
)
def test_the_list_plan_learns_states_from_pages_without_a_get_each(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    _bot, first, _second = _two_watched(start_bot, slack, together, 2)
    before = together.requests_for(FIRST) + together.requests_for(SECOND)
    together.set_status(FIRST, "STOPPING")  # still live: seen on page 1
    wait_until(lambda: _thread(slack, "C1", first), what="the change told")
    _list_passes(together, 2)
    assert len(_thread(slack, "C1", first)) == 1
    assert together.requests_for(FIRST) + together.requests_for(SECOND) == before  # no GETs
    assert query(db_url, "SELECT last_status FROM watched_sessions ORDER BY session_id") == [
        ("TRAINING_SESSION_STATUS_STOPPING",),
        ("TRAINING_SESSION_STATUS_RUNNING",),
    ]


@pytest.mark.backend_independent(
    "the poll plan; its claims on both backends are tested with replicas"
)
def test_a_session_ending_between_two_list_pages_is_told_from_its_own_get(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    _bot, _first, second = _two_watched(start_bot, slack, together, 1)
    gets = together.requests_for(SECOND)
    # Page 1 has gone out without SECOND (it is on page 2); then it stops.
    ended = _BetweenPages(together, lambda: together.set_status(SECOND, "STOPPED"))
    wait_until(lambda: _thread(slack, "C2", second), timeout=20, what="the end told")
    assert ended.done.is_set()
    _list_passes(together, 2)
    [told] = _thread(slack, "C2", second)
    assert "Stopped" in told
    assert together.requests_for(SECOND) > gets  # missing from the pages: asked directly
    assert query(
        db_url, "SELECT active, last_status FROM watched_sessions WHERE session_id = :s", s=SECOND
    ) == [(False, "TRAINING_SESSION_STATUS_STOPPED")]


def test_a_failed_list_page_ends_no_session_it_did_not_list(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    bot, first, second = _two_watched(start_bot, slack, together, 1)
    together.set_status(FIRST, "STOPPING")
    # Page 2 (where SECOND is) fails once: SECOND is missing from that pass.
    failed = _BetweenPages(together, lambda: together.fail(None, status=503, times=1))
    wait_until(lambda: _thread(slack, "C1", first), timeout=20, what="page 1's change told")
    assert failed.done.is_set()
    wait_until(lambda: "a list page failed" in bot.log(), what="the failed page logged")
    _list_passes(together, 3)  # later passes go through
    assert _thread(slack, "C2", second) == []  # never told as ended
    assert query(
        db_url,
        "SELECT active, last_status FROM watched_sessions WHERE session_id = :s",
        s=SECOND,
    ) == [(True, "TRAINING_SESSION_STATUS_RUNNING")]
    assert query(db_url, "SELECT active FROM subscriptions WHERE channel_id = 'C2'") == [(True,)]


@pytest.mark.backend_independent(
    "the poll plan; its claims on both backends are tested with replicas"
)
def test_the_request_budget_stretches_the_interval(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    sids = [f"c{i:07d}-0000-0000-0000-000000000000" for i in range(3)]
    for sid in sids:
        together.add(sid)
    # 3 GETs a round in what the request budget's shares give the poll of 60 requests
    # a minute (`_poll_interval`): one round every 4.1 s, though the minimum interval
    # (0.5 s) would allow nine times as many.
    bot = start_bot(
        POLL_PLAN="get",
        POLL_INTERVAL_SECONDS="10",
        POLL_MIN_INTERVAL_SECONDS="0.5",
        TOGETHER_REQUESTS_PER_MINUTE="60",
    )
    for i, sid in enumerate(sids):
        _subscribe(bot, slack, sid, f"C{i}")
    interval = _poll_interval(3, per_minute=60)
    wait_until(
        lambda: interval * 0.95 <= (bot.metric("rlbot_poll_interval_seconds") or 0) <= interval,
        timeout=20,
        what=f"the interval in use ({interval:.2f} s)",
    )
    start = together.requests_for(sids[0])
    time.sleep(10)
    polled = together.requests_for(sids[0]) - start
    assert 2 <= polled <= 3, polled  # every 4.1 s (and the claim's slack), not every 0.5 s
    assert (bot.metric('rlbot_poll_requests_total{kind="get"}') or 0) >= 6


@pytest.mark.backend_independent(
    "the poll plan; its claims on both backends are tested with replicas"
)
def test_a_new_subscription_is_first_polled_at_the_shortest_interval_not_the_longest(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    sid = "e0000000-0000-0000-0000-000000000001"
    together.add(sid)
    # The longest interval is a minute; the budget allows one GET every 2 s.
    bot = start_bot(POLL_INTERVAL_SECONDS="60", POLL_MIN_INTERVAL_SECONDS="2")
    root = _subscribe(bot, slack, sid, "C1")
    together.set_status(sid, "STOPPING")  # right after subscribing
    # told within seconds: the first poll was due in 2 s, not 60
    wait_until(lambda: _thread(slack, "C1", root), timeout=30, what="the change told")
    assert "Stopping" in _thread(slack, "C1", root)[0]


# --- one list pass serves every consumer ---------------------------------------------------------

ERROR_LIST = "TRAINING_SESSION_STATUS_ERROR"
LIVE_LIST = "TRAINING_SESSION_STATUS_CREATING"  # only the live statuses' pass asks for it


def _lists_of(together: FakeTogether, status: str) -> int:
    with together._lock:
        return sum(1 for p in together.paths if p.startswith(LIST_PATH) and status in p)


@pytest.mark.backend_independent(
    "the poll plan; its claims on both backends are tested with replicas"
)
def test_ls_takes_the_pollers_fresh_pass_instead_of_listing_again(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    from tests.commands.test_ls import ask, row_ids

    running = [f"a{i:07d}-0000-0000-0000-000000000000" for i in range(4)]
    for sid in running:
        together.add(sid)
    together.add("b0000000-0000-0000-0000-000000000000", status="CREATING")
    bot = start_bot(POLL_PLAN="list")
    for i, sid in enumerate(running[:2]):
        _subscribe(bot, slack, sid, f"C{i}")
    _list_passes(together, 2)  # the poller lists the live statuses every second
    lists = _first_pages(together)
    lives = _lists_of(together, LIVE_LIST)
    answer = ask(bot, slack, "ls running")
    assert row_ids(answer) == running  # from the live pass, CREATING left out
    # No list of its own: every session list since was the poller's live pass.
    assert _first_pages(together) - lists == _lists_of(together, LIVE_LIST) - lives


class _ErrorBetweenLooks:
    """Holds the poller's next look at the live list (which still shows `sid` RUNNING)
    until the error watch has listed `sid` in ERROR: the poller's look after that
    misses it, and the error watch's pass began since its last look."""

    def __init__(self, together: FakeTogether, sid: str) -> None:
        self.together, self.sid = together, sid
        self.errored = threading.Event()
        self.listed = threading.Event()
        self._errors_before = 0
        together.on_list_page = self

    def __call__(self, target: str) -> None:
        if ERROR_LIST in target and self.errored.is_set():
            # an ERROR page that arrived after the change (the watch lists one at a time)
            if _lists_of(self.together, ERROR_LIST) > self._errors_before:
                self.listed.set()
        elif LIVE_LIST in target and not self.errored.is_set():
            self.together.set_status(self.sid, "ERROR")  # this page still has it RUNNING
            self._errors_before = _lists_of(self.together, ERROR_LIST)
            self.errored.set()
            self.listed.wait(20)


@pytest.mark.backend_independent(
    "the poll plan; its claims on both backends are tested with replicas"
)
def test_a_watched_session_in_the_error_watchs_pages_is_not_asked_for_again(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    first, second = FIRST, SECOND
    together.add(first)
    together.add(second)
    bot = start_bot(POLL_PLAN="list", WATCH_ALL_ERRORS="true", ONCALL_CHANNEL="COPS")
    root = _subscribe(bot, slack, first, "C1")
    _subscribe(bot, slack, second, "C2")
    _list_passes(together, 2)
    gets = together.requests_for(first)
    held = _ErrorBetweenLooks(together, first)
    wait_until(lambda: _thread(slack, "C1", root), timeout=30, what="the error told")
    assert held.listed.is_set()
    assert "Error" in _thread(slack, "C1", root)[0]
    assert together.requests_for(first) == gets  # saved: its final state came from a page
    assert "1 from the error watch's pages" in bot.log()
    assert query(
        db_url, "SELECT active, last_status FROM watched_sessions WHERE session_id = :s", s=first
    ) == [(False, "TRAINING_SESSION_STATUS_ERROR")]
    wait_until(lambda: slack.successful_posts("COPS"), what="on-call told once")
    _list_passes(together, 2)
    assert len(slack.successful_posts("COPS")) == 1


@pytest.mark.backend_independent(
    "the poll plan; its claims on both backends are tested with replicas"
)
def test_sessions_subscribed_at_different_times_share_one_list_pass_an_interval(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    sids = [f"f{i:07d}-0000-0000-0000-00000000000a" for i in range(3)]
    for sid in sids:
        together.add(sid)
    # A page a round in the poll's shares of 30 requests a minute: about every 4.1 s,
    # checked for due sessions every 0.25 s.
    bot = start_bot(
        POLL_PLAN="list",
        POLL_INTERVAL_SECONDS="10",
        POLL_MIN_INTERVAL_SECONDS="0.5",
        TOGETHER_REQUESTS_PER_MINUTE="30",
    )
    for i, sid in enumerate(sids):
        _subscribe(bot, slack, sid, f"C{i}")
        time.sleep(1)  # each first due at its own moment
    _list_passes(together, 2)
    # The first list cycle took along the sessions due before the next one: one pass
    # a round serves all three (each on its own phase would make three).
    start = _first_pages(together)
    time.sleep(10)
    passes = _first_pages(together) - start
    # Shared, a round is one pass: one to three in 10 s at a 4-5 s interval (the
    # interval follows the pages measured per session polled, which the first
    # one- and two-session cycles raise for a while). Each on its own phase would
    # make three passes a round: six or more.
    assert 1 <= passes <= 4, passes
    cycles = [line for line in bot.log().splitlines() if "poll cycle:" in line]
    assert "poll cycle: 3 sessions" in cycles[-1]  # all three in one cycle


def _poll_interval(round_cost: float, *, per_minute: float) -> float:
    """The interval a round of `round_cost` requests gets from the request budget's
    shares with no other tier spending beyond its floor (a test bot's tiers)."""
    slice_seconds = 60.0 / SLICES
    shares = Shares.of(
        per_minute * slice_seconds / 60.0,
        frozenset({Tier.PEOPLE, Tier.POLL, Tier.FOLLOW, Tier.IDLE}),
    )
    room = shares.poll_capacity({}) * 60.0 / (slice_seconds + GRANT_SECONDS) * GATE_HEADROOM
    return round_cost * 60.0 / room


# --- a list that never ends ----------------------------------------------------------------------


@pytest.mark.backend_independent(
    "the poll plan; its claims on both backends are tested with replicas"
)
def test_an_endless_list_cursor_keeps_to_the_budget_and_ends_no_session(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    """Together's list says `has_more` with a fresh cursor forever, a made-up session
    a page: the poller's first pass is cut near what its 20 sessions justify, then its
    estimate (pages of one or two rows) turns it to GETs; its interval follows what
    it measured itself spend, every session is still polled, and none is told ended."""
    sids = [f"d{i:07d}-0000-0000-0000-00000000000e" for i in range(20)]
    for sid in sids:
        together.add(sid)
    together.endless_list = True
    budget = 120
    bot = start_bot(
        POLL_PLAN="auto",
        POLL_INTERVAL_SECONDS="60",
        POLL_MIN_INTERVAL_SECONDS="1",
        TOGETHER_REQUESTS_PER_MINUTE=str(budget),
    )
    roots = {sid: _subscribe(bot, slack, sid, f"C{i}") for i, sid in enumerate(sids)}
    _list_passes(together, 1)
    gets, passes = {sid: together.requests_for(sid) for sid in sids}, _first_pages(together)
    # The first pass is over once the GETs it turned the plan to begin; from then on
    # the poller spends by rounds, one every interval. A window of W seconds holds at
    # most W / interval + 1 rounds, so it spends at most the budget's share of W plus
    # one round (20 GETs, or a pass cut at 19 pages): the same bound a loaded machine
    # keeps, whichever instant the window starts at.
    wait_until(
        lambda: any(together.requests_for(sid) > gets[sid] for sid in sids),
        what="the first round of GETs",
    )
    with together._lock:
        start = len(together.requests)
    window, one_round = 20.0, len(sids)
    time.sleep(window)  # a rate is measured over time
    with together._lock:
        spent = len(together.requests) - start
    assert spent <= budget * window / 60 + one_round, spent
    # still polled: by a GET each, or (all on the first page) by passes
    polled = _first_pages(together) >= passes + 2 or all(
        together.requests_for(sid) > gets[sid] for sid in sids
    )
    assert polled, (passes, _first_pages(together), gets)
    for i, sid in enumerate(sids):
        assert _thread(slack, f"C{i}", roots[sid]) == [], sid
    assert query(db_url, "SELECT count(*) FROM watched_sessions WHERE active") == [(20,)]
    assert query(db_url, "SELECT count(*) FROM subscriptions WHERE active") == [(20,)]
