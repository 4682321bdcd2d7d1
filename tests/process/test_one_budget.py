"""One Together budget for the whole deployment, as Together would count it: two
replicas on one PostgreSQL with every watch on (the org-wide error and idle
watches, the spend watch, follow discovery) at the demo's pace
(`POLL_INTERVAL_SECONDS=2`), against a project busy enough that every watch
wants more than its share. Over three minutes no rolling minute at the
Together-shaped server holds more than `TOGETHER_REQUESTS_PER_MINUTE`, and each
new session a `follow all` rule matches gets its card within 30 s."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.support import BotFactory, BotProcess, wait_until

BUDGET = 120  # the default
RUN_SECONDS = 185.0  # three minutes of rolling minutes, and a little
CARD_WITHIN = 30.0
FOLLOWING = "CFOLLOW"
OPS = "COPS"
EVERY_WATCH = {
    "WATCH_ALL_ERRORS": "true",
    "WATCH_IDLE_RESOURCES": "true",
    "IDLE_RESOURCE_ALERT_MINUTES": "1",
    "ONCALL_CHANNEL": OPS,
    "SPEND_WATCH": "true",
    "SPEND_REFRESH_SECONDS": "30",
    "POLL_PLAN": "auto",
    "POLL_INTERVAL_SECONDS": "2",
    "POLL_MIN_INTERVAL_SECONDS": "1",
    "TOGETHER_REQUESTS_PER_MINUTE": str(BUDGET),
}


def _sid(kind: int, n: int) -> str:
    return f"{kind:02x}{n:06x}-e89b-42d3-a456-426614174000"


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _busy_project(together: FakeTogether) -> list[str]:
    """160 live sessions (two list pages), 4 of them to subscribe, each on its own
    resource; 60 sessions in ERROR (an error page); 8 READY resources idle for an
    hour, each with a stopped session on it (a run of the idle watch: 17 requests).
    Returns the sessions to subscribe."""
    old = datetime.now(UTC) - timedelta(hours=2)
    for n in range(160):
        together.add(
            _sid(1, n), "RUNNING", model_resources_id=f"res-live-{n}", created_at=_iso(old)
        )
    for n in range(60):
        together.add(_sid(2, n), "ERROR", created_at=_iso(old), updated_at=_iso(old))
    for n in range(8):
        together.add_resource(f"res-idle-{n}", "READY", now=old)
        together.add(
            _sid(3, n), "STOPPED", model_resources_id=f"res-idle-{n}", updated_at=_iso(old)
        )
    return [_sid(1, n) for n in range(4)]


def _busiest_minute(together: FakeTogether) -> tuple[int, float]:
    """The most requests the server saw in any 60 s from one of them on, and when."""
    with together._lock:
        times = sorted(r.at for r in together.requests)
    best, at, j = 0, 0.0, 0
    for i, start in enumerate(times):
        while j < len(times) and times[j] < start + 60.0:
            j += 1
        if j - i > best:
            best, at = j - i, start - times[0]
    return best, at


def _card_for(slack: FakeSlack, name: str) -> bool:
    return any(
        name in json.dumps(c.blocks) for c in slack.successful_posts(FOLLOWING) if not c.thread_ts
    )


@pytest.mark.long("three minutes of rolling minutes at the demo's pace")
def test_two_replicas_with_every_watch_on_keep_every_minute_within_the_budget(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    if db_url.startswith("sqlite"):
        pytest.skip("replicas share a PostgreSQL database")
    subscribe = _busy_project(together)
    a = start_bot(REPLICA_ID="a", **EVERY_WATCH)
    b = start_bot(REPLICA_ID="b", **EVERY_WATCH)
    began = time.monotonic()
    for i, sid in enumerate(subscribe):
        replica = (a, b)[i % 2]
        token = f"sub{i}"
        replica.command(f"subscribe {sid}", response_url=slack.response_url(token))
        assert "Subscribed" in json.dumps(slack.wait_for_response(token, timeout=30))
    token = "follow"
    a.command("follow all", response_url=slack.response_url(token), channel_id=FOLLOWING)
    assert "Following every session" in json.dumps(slack.wait_for_response(token, timeout=30))

    # New sessions at intervals through the run: each gets its card within 30 s.
    waits: list[float] = []
    n = 0
    while time.monotonic() - began < RUN_SECONDS - CARD_WITHIN:
        name = f"fresh-run-{n}"
        added = time.monotonic()
        together.add(_sid(4, n), "RUNNING", created_at=_iso(datetime.now(UTC)), display_name=name)
        wait_until(lambda name=name: _card_for(slack, name), timeout=CARD_WITHIN, what=name)  # type: ignore[misc]
        waits.append(time.monotonic() - added)
        n += 1
        time.sleep(max(0.0, 20.0 - waits[-1]))
    left = RUN_SECONDS - (time.monotonic() - began)
    if left > 0:
        time.sleep(left)

    busiest, at = _busiest_minute(together)
    print(f"busiest minute: {busiest} requests, from {at:.0f} s; cards after {waits}")
    assert busiest <= BUDGET, (busiest, at)
    assert len(waits) >= 5 and max(waits) <= CARD_WITHIN, waits
    # every watch had work and did some of it, within its share
    spent = _spent_by_consumer(a, b)
    for consumer in ("poll", "watch_errors", "follow", "watch_idle", "spend"):
        assert spent.get(consumer, 0) > 0, spent
    waited = sum(
        r.metric(f'rlbot_budget_waited_total{{consumer="{c}"}}') or 0
        for r in (a, b)
        for c in ("watch_errors", "watch_idle", "follow", "poll")
    )
    assert waited > 0  # the budget was busy: some periodic reads waited for a share
    # the idle watch, the lowest tier, did its run within its floor and told on-call
    assert any("idle for" in (c.text or "") for c in slack.successful_posts(OPS))


def _spent_by_consumer(*bots: BotProcess) -> dict[str, float]:
    out: dict[str, float] = {}
    for bot in bots:
        for consumer in ("poll", "watch_errors", "follow", "watch_idle", "spend", "command"):
            total = 0.0
            for kind in (
                "get",
                "list_page",
                "resource_get",
                "resource_list_page",
                "estimate_cost",
            ):
                name = f'rlbot_together_requests_spent_total{{consumer="{consumer}",kind="{kind}"}}'
                total += bot.metric(name) or 0.0
            out[consumer] = out.get(consumer, 0.0) + total
    return out
