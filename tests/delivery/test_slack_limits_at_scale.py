"""A team's scale under Slack's limits: 150 subscribed running sessions in 3
channels whose steps move on every read, then 10 status changes. The Slack-shaped
server refuses `chat.update` past 50 a minute and `chat.postMessage` past a burst
then one a second per channel, as Slack does. Each change is told once and soon,
the bot stays under the update limit, gives nothing up, every changed card ends
showing its status, and the outbox holds a bounded number of rows (one or two a
card), not one a step."""

from __future__ import annotations

import statistics
import time
from collections import deque

import pytest

from bench.env import seed
from bot.rendering.words import status_words
from bot.simulated import FakeSlack, FakeTogether
from bot.simulated.slack import SlackCall
from bot.store.tables import utcnow
from tests.support import BotProcess, query, wait_until

SESSIONS, CHANNELS, CHANGES = 150, 3, 10
#: (session index, its new status): ends and a change that keeps the card live
NEW_STATUS = [
    (i * 13 + 4, s) for i, s in enumerate(["STOPPING"] * 4 + ["STOPPED"] * 3 + ["ERROR"] * 3)
]


def _channel(i: int, _j: int) -> str:
    return f"C{i % CHANNELS}"


def _busiest_minute(calls: list[SlackCall]) -> int:
    window: deque[float] = deque()
    most = 0
    for at in sorted(c.at for c in calls):
        window.append(at)
        while window[0] <= at - 60.0:
            window.popleft()
        most = max(most, len(window))
    return most


@pytest.mark.long("150 sessions under Slack's limits for over a minute")
@pytest.mark.backend_independent(
    "the order and pace are the queue's, tested on both in tests/outbox"
)
def test_status_changes_are_told_soon_under_slacks_limits_at_150_sessions(
    start_bot: object, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    assert slack.limits.enabled  # Slack's limits are on, as in Slack
    together.steps_per_read = 10
    ids = seed(
        db_url,
        together,
        sessions=SESSIONS,
        channels_per_session=1,
        channel_of=_channel,
        due=utcnow(),
    )
    for channel, root in query(db_url, "SELECT channel_id, root_ts FROM subscriptions"):
        slack.add_message(channel, "root card", ts=root)  # the cards the threads hang on
    bot: BotProcess = start_bot(  # type: ignore[operator]
        # the plan the budget picks and one post a second per channel, as in
        # production; the poll's interval is the tests' (how soon a change is read
        # is the budget's concern, tests/poll), so what is timed here is delivery
        POLL_PLAN="auto",
        CHANNEL_MIN_INTERVAL_SECONDS="1",
        SPEND_WATCH="true",  # its default: the card shows the resource, steps/min, spend
    )
    started = time.monotonic()
    pending: list[int] = []

    def sample() -> None:
        pending.append(query(db_url, "SELECT count(*) FROM outbox WHERE state = 'pending'")[0][0])

    # The steps move: routine redraws pile up against the update limit.
    while time.monotonic() - started < 25:
        sample()
        time.sleep(1)
    assert slack.successful("chat.update"), "no routine redraw at all: nothing was tested"

    changed_at: dict[str, float] = {}
    for index, status in NEW_STATUS:
        sid = ids[index]
        together.set_status(sid, status)
        changed_at[sid] = time.monotonic()
        sample()
        time.sleep(1)
    roots = {
        ids[i]: r[0]
        for i, _ in NEW_STATUS
        for r in query(db_url, "SELECT root_ts FROM subscriptions WHERE session_id = :s", s=ids[i])
    }
    words = {ids[i]: status_words(s) for i, s in NEW_STATUS}

    def told(sid: str) -> list[SlackCall]:
        return [
            c
            for c in slack.successful_posts(_channel(ids.index(sid), 0))
            if c.thread_ts == roots[sid] and words[sid] in str(c.text) + str(c.blocks)
        ]

    def all_told() -> bool:
        sample()
        return all(told(sid) for sid in changed_at)

    wait_until(all_told, timeout=90, what="every status change told")
    latencies = [told(sid)[0].at - at for sid, at in changed_at.items()]

    def card_shows(sid: str) -> bool:
        updates = slack.updates(_channel(ids.index(sid), 0), roots[sid])
        return bool(updates) and words[sid] in str(updates[-1].blocks)

    wait_until(
        lambda: all(card_shows(sid) for sid in changed_at), timeout=60, what="every card final"
    )
    # Over a minute of it, then a few more ticks: nothing is told twice.
    while time.monotonic() - started < 70:
        sample()
        time.sleep(1)

    assert all(len(told(sid)) == 1 for sid in changed_at), {s: len(told(s)) for s in changed_at}
    assert statistics.mean(latencies) <= 10.0, latencies
    attempts = slack.calls_to("chat.update")
    busiest = _busiest_minute(attempts)
    assert busiest <= 60, f"{busiest} chat.update attempts in one minute"
    assert query(db_url, "SELECT count(*) FROM outbox WHERE state = 'dead'") == [(0,)]
    assert all(card_shows(sid) for sid in changed_at)
    assert max(pending) <= 2 * SESSIONS, max(pending)
    print(
        f"latencies {sorted(round(x, 1) for x in latencies)}; busiest minute {busiest} updates "
        f"({sum(1 for c in attempts if not c.ok)} refused); most pending {max(pending)}; "
        f"{len(slack.successful('chat.update'))} cards redrawn; bot {bot.url}"
    )
