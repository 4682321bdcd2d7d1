"""In the real process, against a Together-shaped server that sends fewer rows a
page than asked (2, or 1): every subscribed session's change is told in its
thread, and its root card redrawn, within two poll intervals, whether the
session sits on the first page, the last, or a page a pass did not reach."""

from __future__ import annotations

import re
import threading
import time

import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.support import BotFactory, BotProcess, wait_until

# The longest poll interval: the interval in use is never longer.
INTERVAL = 3.0
# What delivery adds after the poll that learnt a change (it is rung at once).
DELIVERY = 1.5
LIST_PATH = "/v1/rl/training-sessions?"


def _sid(i: int) -> str:
    return f"a{i:07d}-0000-0000-0000-0000000000aa"


def _subscribe(bot: BotProcess, slack: FakeSlack, sid: str, channel: str) -> str:
    token = f"sub-{sid}-{channel}"
    bot.command(f"subscribe {sid}", response_url=slack.response_url(token), channel_id=channel)
    assert "Subscribed" in str(slack.wait_for_response(token))
    return next(c.ts for c in slack.successful_posts(channel) if c.thread_ts is None and c.ts)


def _first_pages(together: FakeTogether) -> int:
    with together._lock:
        return sum(1 for p in together.paths if p.startswith(LIST_PATH) and "after=" not in p)


def _told(slack: FakeSlack, channel: str, root: str) -> bool:
    in_thread = any("Stopping" in (c.text or "") for c in slack.posts_in_thread(channel, root))
    card = any("Stopping" in str(c.blocks) for c in slack.updates(channel, root))
    return in_thread and card


def _change_all_and_wait(
    together: FakeTogether, slack: FakeSlack, roots: dict[str, tuple[str, str]]
) -> float:
    """Every session in `roots` (id: channel, root) goes to STOPPING; how long until
    the last of them was told in its thread and on its card."""
    started = time.monotonic()
    for sid in roots:
        together.set_status(sid, "STOPPING")
    wait_until(
        lambda: all(_told(slack, ch, root) for ch, root in roots.values()),
        timeout=30,
        what="every change told",
    )
    return time.monotonic() - started


def _failed_polls(bot: BotProcess) -> list[int]:
    """Each poll cycle's failed count: Together answered every request here, so
    a failure can only be a session the plan left unread."""
    return [int(n) for n in re.findall(r"poll cycle: \d+ sessions, (\d+) failed", bot.log())]


def _settle(together: FakeTogether, passes: int) -> None:
    """Let the poller make `passes` list passes (or a few seconds of GETs)."""
    start = _first_pages(together)
    deadline = time.monotonic() + 4 * INTERVAL
    while _first_pages(together) < start + passes and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.mark.parametrize("replicas", [1, 2])
def test_every_subscription_hears_its_change_with_pages_of_two_rows(
    replicas: int, start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    if replicas > 1 and db_url.startswith("sqlite"):
        pytest.skip("replicas share a PostgreSQL database")
    together.page_rows = 2
    sids = [_sid(i) for i in range(12)]
    for sid in sids:
        together.add(sid)
    bots = [
        # a budget a round of 7 pages every 3 s fits in: the plan is tested, not the budget
        start_bot(
            POLL_PLAN="auto",
            POLL_INTERVAL_SECONDS=str(INTERVAL),
            REPLICA_ID=f"r{i}",
            TOGETHER_REQUESTS_PER_MINUTE="600",
        )
        for i in range(replicas)
    ]
    roots = {
        sid: (f"C{i}", _subscribe(bots[i % replicas], slack, sid, f"C{i}"))
        for i, sid in enumerate(sids)
    }
    _settle(together, 2)
    took = _change_all_and_wait(together, slack, roots)
    assert took <= 2 * INTERVAL + DELIVERY, took
    for bot in bots:
        assert not any(_failed_polls(bot)), _failed_polls(bot)


@pytest.mark.backend_independent(
    "the poll plan; pages of two rows run on both, with replicas on PostgreSQL"
)
def test_every_subscription_hears_its_change_with_pages_of_one_row(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    together.page_rows = 1
    sids = [_sid(i) for i in range(6)]
    for sid in sids:
        together.add(sid)
    # The list forced: a page a session, so the pass is as long as it gets.
    bot = start_bot(POLL_PLAN="list", POLL_INTERVAL_SECONDS=str(INTERVAL))
    watched = [sids[0], sids[3], sids[5]]  # the first, a middle and the last page
    roots = {sid: (f"C{i}", _subscribe(bot, slack, sid, f"C{i}")) for i, sid in enumerate(watched)}
    _settle(together, 2)
    took = _change_all_and_wait(together, slack, roots)
    assert took <= 2 * INTERVAL + DELIVERY, took
    assert not any(_failed_polls(bot)), _failed_polls(bot)


@pytest.mark.backend_independent(
    "the poll plan; pages of two rows run on both, with replicas on PostgreSQL"
)
def test_a_subscribed_session_on_the_last_page_hears_its_change(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    together.page_rows = 2
    sids = [_sid(i) for i in range(9)]  # five pages, the last of one row
    for sid in sids:
        together.add(sid)
    bot = start_bot(POLL_PLAN="auto", POLL_INTERVAL_SECONDS=str(INTERVAL))
    # Subscribed in four channels, and one more session on the first page.
    last = sids[-1]
    roots = {last: ("C0", _subscribe(bot, slack, last, "C0"))}
    others = {ch: _subscribe(bot, slack, last, ch) for ch in ("C1", "C2", "C3")}
    roots[sids[0]] = ("C4", _subscribe(bot, slack, sids[0], "C4"))
    _settle(together, 2)
    took = _change_all_and_wait(together, slack, roots)
    assert took <= 2 * INTERVAL + DELIVERY, took
    wait_until(
        lambda: all(_told(slack, ch, root) for ch, root in others.items()),
        timeout=2 * INTERVAL + DELIVERY,
        what="every channel of the last page's session told",
    )
    assert not any(_failed_polls(bot)), _failed_polls(bot)


@pytest.mark.backend_independent(
    "the poll plan; pages of two rows run on both, with replicas on PostgreSQL"
)
def test_a_change_past_a_list_page_that_failed_is_told_from_its_own_get(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    together.page_rows = 2
    sids = [_sid(i) for i in range(8)]  # four pages
    for sid in sids:
        together.add(sid)
    bot = start_bot(POLL_PLAN="list", POLL_INTERVAL_SECONDS=str(INTERVAL))
    watched = [sids[0], sids[2], sids[5], sids[7]]  # one on each page
    roots = {sid: (f"C{i}", _subscribe(bot, slack, sid, f"C{i}")) for i, sid in enumerate(watched)}
    _settle(together, 2)
    changed = threading.Event()

    def between_pages(target: str) -> None:
        """As the next pass's first page goes out: every session changes, and the
        second page will be an HTML 404 (a proxy's, say), which ends that pass."""
        if changed.is_set() or "after=" in target:
            return
        for sid in watched:
            together.set_status(sid, "STOPPING")
        together.fail(
            None,
            status=404,
            body="<html><body>Not Found</body></html>",
            content_type="text/html",
            matching="after=",
            times=1,
        )
        changed.set()

    together.on_list_page = between_pages
    assert changed.wait(4 * INTERVAL)
    started = time.monotonic()
    wait_until(
        lambda: all(_told(slack, ch, root) for ch, root in roots.values()),
        timeout=30,
        what="every change told",
    )
    took = time.monotonic() - started
    assert took <= 2 * INTERVAL + DELIVERY, took
    assert "a list page failed" in bot.log()
    assert not any(_failed_polls(bot)), _failed_polls(bot)
