"""What a read that keeps failing costs, through a real `rl-bot serve` with the
Slack-, Together- and W&B-shaped servers: one model resource whose every
answer cannot be read, asked about by the poll cycle's resource reads (while
a session on it runs) and by the subscribed-idle watch (once another session on it
ended), and a W&B run that answers 500 every time. Each is tried again later
after every failure in a row: a few requests a minute, not one every run.
READ_RETRY_SECONDS shortens the resource reads' first wait so that the test
sees two doublings in seconds; W&B's waits are counted from its refresh, whose
30 s floor makes the test read the run's stored next read instead."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from bot.simulated import FakeSlack, FakeTogether
from bot.simulated.wandb import FakeWandb
from tests.support import BotFactory, query, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.backend_independent("back-off is kept in memory"),
]

SID_RUNS = "1a3e4567-e89b-12d3-a456-426614174000"  # runs on the bad resource all along
SID_ENDS = "2b3e4567-e89b-12d3-a456-426614174000"  # ends on it: the subscribed-idle watch's
SID_OTHER = "3c3e4567-e89b-12d3-a456-426614174000"  # ends on a queued one, looked at each run
#: the first wait after a failed resource read: tries at 0, 8, 24, 56 s ...
RETRY = 8.0
#: how long the requests are counted: past the second try (8 s) and short of
#: the third (24 s, counted from the first failure, which came before the window)
WINDOW = 20.0
#: W&B's refresh (its floor): a failed read's next read is two refreshes later
WANDB_REFRESH = 30.0


def resource_gets(together: FakeTogether, resource_id: str) -> int:
    return len(
        [
            r
            for r in list(together.requests)
            if r.route == "resource" and r.session_id == resource_id
        ]
    )


def wandb_reads(wandb: FakeWandb, run_name: str) -> int:
    return len([c for c in list(wandb.calls) if c.variables.get("name") == run_name])


def test_a_resource_and_a_run_that_never_answer_cost_a_few_requests_a_minute(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    # Not live (so no list of live resources shows it): only GETs read it.
    together.add_resource("res-bad", "STOPPED")
    together.add_resource("res-queued", "PENDING")
    together.add(SID_RUNS, "RUNNING", model_resources_id="res-bad")
    together.add(SID_ENDS, "RUNNING", model_resources_id="res-bad")
    together.add(SID_OTHER, "CREATING", model_resources_id="res-queued")
    # An answer that does not read (HTML where JSON belongs), for every GET of it.
    together.fail(
        "res-bad", body="<html>bad gateway</html>", content_type="text/html", route="resource"
    )
    with FakeWandb() as wandb:
        wandb.fail_next(status=500, text="upstream error", times=100_000)
        bot = start_bot(
            IDLE_RESOURCE_ALERT_MINUTES="0.05",
            WATCH_IDLE_RESOURCES="false",
            SPEND_WATCH="true",  # the poll cycle reads each session's resource
            WANDB_API_KEY=wandb.api_key,
            WANDB_BASE_URL=wandb.url,
            WANDB_REFRESH_SECONDS=str(WANDB_REFRESH),
            READ_RETRY_SECONDS=str(RETRY),
        )
        for sid, channel in ((SID_RUNS, "C1"), (SID_ENDS, "C2"), (SID_OTHER, "C3")):
            token = f"sub-{channel}"
            bot.command(
                f"subscribe {sid}", response_url=slack.response_url(token), channel_id=channel
            )
            assert "Subscribed" in json.dumps(slack.wait_for_response(token))
        together.set_status(SID_ENDS, "STOPPED")
        together.set_status(SID_OTHER, "STOPPED")
        # Both watches have met the bad resource, and W&B has failed once.
        wait_until(lambda: resource_gets(together, "res-bad") >= 2, what="res-bad asked")
        wait_until(lambda: wandb_reads(wandb, SID_RUNS[:8]), what="the first W&B read")
        first_read = datetime.now(UTC).replace(tzinfo=None)
        queued = resource_gets(together, "res-queued")
        time.sleep(WINDOW)
        # The check ran all along (the queued resource is looked at every run) ...
        assert resource_gets(together, "res-queued") >= queued + 5
        # ... and asked Together about the bad resource a few times, not every run.
        bad = resource_gets(together, "res-bad")
        print(f"res-bad: {bad} GETs; W&B: {wandb_reads(wandb, SID_RUNS[:8])} reads")
        assert bad <= 6, f"{bad} GETs of a resource that never answers in {WINDOW:.0f} s"
        assert wandb_reads(wandb, SID_RUNS[:8]) == 1
        # The failed W&B read moved the run's next read a refresh further off than
        # a good read would (stored as due `read_at` + refresh: `next_read_at`).
        rows = query(
            bot.env["DATABASE_URL"],
            "SELECT read_at FROM session_metrics WHERE session_id = :sid",
            sid=SID_RUNS,
        )
        read_at = datetime.fromisoformat(str(rows[0][0]))
        assert (read_at - first_read).total_seconds() >= WANDB_REFRESH - 10, rows
        assert "could not check an idle resource" in bot.log()
