"""Redraw pacing at a size (`python -m bench.redraw_pace --sessions 1000`).

N subscribed RUNNING sessions in 3 channels whose steps move on every read, the
spend watch on (the card shows the resource, steps/min and spend), Slack's limits
on in the Slack-shaped server. For `--seconds` it samples the outbox's pending
rows each second, and reports the busiest rolling minute of `chat.update`
attempts, the refusals, how many cards were redrawn and how often each would be
at that pace, and the most rows pending. A standalone measurement, like
`bench.rules_pass`; the model beside it is `CARD_REDRAWS_PER_MINUTE`: a card is
redrawn about every N / CARD_REDRAWS_PER_MINUTE minutes.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import deque
from typing import Any

from bench.env import Bot, database, scalar, seed
from bot.simulated import FakeSlack, FakeTogether
from bot.store.tables import utcnow


def run(sessions: int, seconds: float, backend: str) -> dict[str, Any]:
    with database(backend) as db, FakeSlack() as slack, FakeTogether() as together:
        together.steps_per_read = 10
        seed(
            db.url,
            together,
            sessions=sessions,
            channels_per_session=1,
            channel_of=lambda i, _j: f"C{i % 3}",
            due=utcnow(),
        )
        bot = Bot(
            db_url=db.url,
            slack=slack,
            together=together,
            env={"POLL_PLAN": "auto", "CHANNEL_MIN_INTERVAL_SECONDS": "1", "SPEND_WATCH": "true"},
        )
        try:
            started = time.monotonic()
            pending: list[int] = []
            while time.monotonic() - started < seconds:
                pending.append(
                    int(scalar(db.url, "SELECT count(*) FROM outbox WHERE state = 'pending'"))
                )
                time.sleep(1)
        finally:
            bot.stop()
        updates = slack.calls_to("chat.update")
        window: deque[float] = deque()
        busiest = 0
        for at in sorted(c.at for c in updates):
            window.append(at)
            while window[0] <= at - 60.0:
                window.popleft()
            busiest = max(busiest, len(window))
        done = [c for c in updates if c.ok]
        cards = {c.params.get("ts") for c in done}
        per_minute = len(done) / (seconds / 60.0)
        return {
            "sessions": sessions,
            "backend": backend,
            "seconds": seconds,
            "busiest_minute_updates": busiest,
            "updates_refused": len(updates) - len(done),
            "updates_per_minute": round(per_minute, 1),
            "cards_redrawn": len(cards),
            "minutes_between_redraws_of_a_card": round(sessions / per_minute, 1)
            if per_minute
            else None,
            "most_pending_rows": max(pending),
            "last_pending_rows": pending[-1],
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=150)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--backend", default="sqlite")
    args = parser.parse_args()
    print(json.dumps(run(args.sessions, args.seconds, args.backend), indent=2))


if __name__ == "__main__":
    main()
