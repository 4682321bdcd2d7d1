"""The chart scenario: a click on a card's Chart button to the PNG in the
thread, with W&B's history at 1,000 points a series × 2 series, through a real
`rl-bot serve` and the Slack-, Together- and W&B-shaped servers.

Reported: click → upload for the first chart (matplotlib imported on it), for a
second chart after the step moved (a new render, matplotlib warm) and for a
repeated click (the cache); the bot's own render time (`rlbot_chart_render_seconds`);
and the process's RSS (VmRSS) and peak (VmHWM) idle before any chart and after.
Targets: click → upload ≤ 3 s (render ≤ 0.5 s); RSS after charting ≤ +60 MB.
"""

from __future__ import annotations

import math
import time
from typing import Any

from bench.env import Bot, database, session_id
from bot.simulated import FakeSlack, FakeTogether
from bot.simulated.wandb import FakeRun, FakeWandb

CHANNEL = "CCHART"
TARGET_CLICK_S = 3.0
TARGET_RENDER_S = 0.5
TARGET_RSS_MB = 60.0


def _history(points: int) -> list[dict[str, Any]]:
    return [
        {
            "_step": i * 2,
            "reward": 0.2 + 0.6 * (1 - math.exp(-i / 300)) + 0.03 * math.sin(i / 5),
            "loss": 2.5 * math.exp(-i / 400) + 0.3 + 0.05 * math.cos(i / 3),
        }
        for i in range(points)
    ]


def chart(backend: str, *, points: int = 1000) -> dict[str, Any]:
    sid = session_id(0)
    with (
        database(backend) as db,
        FakeSlack() as slack,
        FakeTogether() as together,
        FakeWandb() as wandb,
    ):
        together.add(sid, step="100")
        wandb.add_run("example-org", "grpo-gsm8k", sid[:8], FakeRun(rows=_history(points)))
        env = {"WANDB_API_KEY": wandb.api_key, "WANDB_BASE_URL": wandb.url}
        with Bot(db_url=db.url, slack=slack, together=together, env=env) as bot:
            bot.proc.command(
                f"subscribe {sid} stall=off",
                response_url=slack.response_url("sub"),
                channel_id=CHANNEL,
            )
            slack.wait_for_response("sub")
            root = next(c.ts for c in slack.successful_posts(CHANNEL) if c.thread_ts is None)
            time.sleep(2.0)  # idle: the subscription polled, no chart drawn yet
            idle = bot.memory_mb()

            def click(n: int) -> float:
                started = time.monotonic()
                bot.proc.click(
                    "rl_chart",
                    sid,
                    response_url=slack.response_url(f"click-{n}"),
                    channel_id=CHANNEL,
                    message_ts=root,
                    is_ephemeral=False,
                )
                uploads = slack.wait_for(
                    lambda: (
                        len(slack.uploads_in(CHANNEL, root)) >= n
                        and slack.uploads_in(CHANNEL, root)
                    ),
                    timeout=60,
                )
                return uploads[n - 1].at - started

            def rendered() -> float:
                return bot.metric("rlbot_chart_render_seconds_sum") or 0.0

            first = click(1)
            render_first = rendered()
            after_first = bot.memory_mb()
            together.set_status(sid, "RUNNING", step="200")  # a new last step: drawn anew
            bot.proc.wait_healthy()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not _moved(db.url, sid):
                time.sleep(0.1)
            second = click(2)
            render_warm = rendered() - render_first
            cached = click(3)
            after = bot.memory_mb()
            render_count = bot.metric("rlbot_chart_render_seconds_count") or 0.0
            sizes = [len(u.data) for u in slack.uploads_in(CHANNEL, root)]
    rss_delta = after["VmRSS"] - idle["VmRSS"]
    return {
        "points_per_series": points,
        "series": 2,
        "click_to_upload_first_s": round(first, 3),
        "click_to_upload_warm_s": round(second, 3),
        "click_to_upload_cached_s": round(cached, 3),
        "renders": int(render_count),
        # the first render imports matplotlib (lazily, on the first chart)
        "render_first_s": round(render_first, 3),
        "render_warm_s": round(render_warm, 3),
        "png_bytes": sizes,
        "rss_idle_mb": round(idle["VmRSS"], 1),
        "peak_rss_idle_mb": round(idle["VmHWM"], 1),
        "rss_after_first_chart_mb": round(after_first["VmRSS"], 1),
        "rss_after_charts_mb": round(after["VmRSS"], 1),
        "peak_rss_after_charts_mb": round(after["VmHWM"], 1),
        "rss_growth_mb": round(rss_delta, 1),
        "target": "click -> upload <= 3 s (render <= 0.5 s); RSS after charting <= +60 MB",
        "target_met": max(first, second) <= TARGET_CLICK_S
        and render_warm <= TARGET_RENDER_S
        and rss_delta <= TARGET_RSS_MB
        and render_count == 2,
    }


def _moved(url: str, sid: str) -> bool:
    from bench.env import scalar

    sql = f"SELECT count(*) FROM progress_points WHERE session_id = '{sid}' AND step = 200"
    return bool(scalar(url, sql))
