"""The scenarios of issue 5. Each takes a backend and a `Sizes` and returns a flat dict of
numbers (plus `target` / `target_met`), so the table and the JSON come from the same place."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass
from typing import Any

from bench.env import (
    Bot,
    database,
    make_due,
    scalar,
    seed,
)
from tests.fakes import FakeSlack, FakeTogether, sign, slash_command_body
from tests.support import SIGNING_SECRET

SLACK_ACK_LIMIT = 3.0


@dataclass(frozen=True)
class Sizes:
    # 1. ack latency
    ack_commands: int = 200
    ack_concurrency: int = 50
    ack_together_latency: float = 2.0
    # 2. poll cycle (and 4. memory/CPU, same run)
    poll_sessions: int = 2000
    poll_channels: int = 5
    poll_terminal: int = 200
    poll_latency: float = 0.05
    poll_concurrency: int = 16
    poll_interval: float = 60.0
    # 2b. statements per cycle, in-process, at two subscription counts
    stmt_sessions: int = 2000
    stmt_channels: tuple[int, int] = (1, 5)
    # 3. fan-out and pacing
    fanout_sessions: int = 500
    fanout_interval: float = 10.0
    pacing_sessions: int = 20
    pacing_interval: float = 2.0
    channel_gap: float = 1.0
    # 5. naive baseline
    naive_sessions: int = 200
    # Slack answers every call after this long
    slack_latency: float = 0.0


FULL = Sizes()
QUICK = Sizes(
    ack_commands=20,
    ack_concurrency=10,
    ack_together_latency=0.3,
    poll_sessions=100,
    poll_channels=5,
    poll_terminal=10,
    poll_latency=0.02,
    stmt_sessions=40,
    fanout_sessions=20,
    fanout_interval=2.0,
    pacing_sessions=3,
    naive_sessions=20,
)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


# -- 1. ack latency -----------------------------------------------------------------------------


def ack_latency(backend: str, sizes: Sizes) -> dict[str, Any]:
    n = sizes.ack_commands
    with (
        database(backend) as db,
        FakeSlack(latency=sizes.slack_latency) as slack,
        FakeTogether() as together,
    ):
        ids = seed(db.url, together, sessions=n, channels_per_session=0)
        together.latency = sizes.ack_together_latency
        with Bot(db_url=db.url, slack=slack, together=together, env={}) as bot:
            started = time.monotonic()
            acks, statuses = asyncio.run(_send_commands(bot.url, slack, ids, sizes))
            tokens = [f"ack-{i}" for i in range(n)]
            timeout = 30 + n * sizes.ack_together_latency / 8

            def delivered() -> int:
                return sum(1 for t in tokens if slack.responses.get(t))

            try:
                slack.wait_for(lambda: delivered() >= n, timeout=timeout)
            except AssertionError:
                pass
            all_in = time.monotonic() - started
            cards = 0
            for i, token in enumerate(tokens):
                body = (slack.responses.get(token) or [{}])[0]
                shown = str(body)
                if ids[i] in shown and ":warning:" not in shown:
                    cards += 1
            server_sum = bot.metric("rlbot_ack_seconds_sum") or 0.0
            server_count = bot.metric("rlbot_ack_seconds_count") or 0.0
    p50, p99 = _pct(acks, 0.50), _pct(acks, 0.99)
    return {
        "commands": n,
        "concurrency": sizes.ack_concurrency,
        "together_latency_s": sizes.ack_together_latency,
        "http_200": sum(1 for s in statuses if s == 200),
        "ack_p50_ms": round(p50 * 1000, 1),
        "ack_p99_ms": round(p99 * 1000, 1),
        "ack_max_ms": round(max(acks) * 1000, 1),
        "ack_p99_ratio_to_3s": round(p99 / SLACK_ACK_LIMIT, 4),
        "server_ack_mean_ms": round(server_sum / server_count * 1000, 2) if server_count else None,
        "cards_delivered": cards,
        "all_answered_s": round(all_in, 2),
        "target": "p99 < 100 ms (ratio <= 0.033) and every card delivered",
        "target_met": p99 < 0.1 and cards == n,
    }


async def _send_commands(
    url: str, slack: FakeSlack, ids: list[str], sizes: Sizes
) -> tuple[list[float], list[int]]:
    import aiohttp

    semaphore = asyncio.Semaphore(sizes.ack_concurrency)
    acks: list[float] = []
    statuses: list[int] = []
    connector = aiohttp.TCPConnector(limit=sizes.ack_concurrency)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def one(i: int, sid: str) -> None:
            body = slash_command_body(
                sid,
                response_url=slack.response_url(f"ack-{i}"),
                channel_id=f"C{i % 10:03d}",
                user_id=f"U{i % 7:03d}",
            )
            async with semaphore:
                headers = sign(SIGNING_SECRET, body)
                started = time.perf_counter()
                async with http.post(f"{url}/slack/events", data=body, headers=headers) as r:
                    await r.read()
                    acks.append(time.perf_counter() - started)
                    statuses.append(r.status)

        await asyncio.gather(*(one(i, sid) for i, sid in enumerate(ids)))
    return acks, statuses


# -- 2 + 4. poll cycle in the real process, with memory and CPU ---------------------------------


def poll_cycle_process(
    backend: str, sizes: Sizes, *, sessions: int, concurrency: int, channels: int, terminal: int
) -> dict[str, Any]:
    """One poll cycle over `sessions` due sessions in a real `rl-bot serve`."""
    latency = sizes.poll_latency
    with (
        database(backend) as db,
        FakeSlack(latency=sizes.slack_latency) as slack,
        FakeTogether() as together,
    ):
        seed_started = time.monotonic()
        seed(
            db.url,
            together,
            sessions=sessions,
            channels_per_session=channels,
            terminal=terminal,
        )
        seed_seconds = time.monotonic() - seed_started
        together.latency = latency
        env = {
            "POLL_INTERVAL_SECONDS": str(sizes.poll_interval),
            "POLL_BATCH_SIZE": str(max(5000, sessions)),
            "POLL_CONCURRENCY": str(concurrency),
            "TOGETHER_MAX_RPS": "10000",
        }
        with Bot(db_url=db.url, slack=slack, together=together, env=env) as bot:
            time.sleep(0.5)
            idle0, t0 = bot.cpu_seconds(), time.monotonic()
            time.sleep(1.0)
            idle_rate = (bot.cpu_seconds() - idle0) / (time.monotonic() - t0)
            together.reset_counts()
            mem_before = bot.memory_mb()
            cpu0, wall0 = bot.cpu_seconds(), time.monotonic()
            make_due(db.url)
            ideal = sessions * latency / concurrency
            cycle = bot.wait_cycle(sessions=sessions, timeout=60 + ideal * 4)
            cpu1, wall1 = bot.cpu_seconds(), time.monotonic()
            time.sleep(0.3)
            requests = together.total_requests
            max_in_flight = together.max_in_flight
            mem_after = bot.memory_mb()
            metric_sum = bot.metric("rlbot_poll_cycle_seconds_sum")
            subs = scalar(db.url, "SELECT count(*) FROM subscriptions WHERE active")
    seconds = cycle[3]
    cpu = cpu1 - cpu0
    return {
        "sessions": sessions,
        "terminal_sessions": terminal,
        "subscriptions": subs,
        "concurrency": concurrency,
        "together_latency_s": latency,
        "cycle_s": round(seconds, 3),
        "cycle_s_metrics": round(metric_sum, 3) if metric_sum is not None else None,
        "ideal_s": round(ideal, 3),
        "cycle_ratio_to_ideal": round(seconds / ideal, 3) if ideal else None,
        "together_requests": requests,
        "together_max_in_flight": max_in_flight,
        "failed": cycle[1],
        "cpu_s": round(cpu, 2),
        "cpu_s_idle_corrected": round(max(0.0, cpu - idle_rate * (wall1 - wall0)), 2),
        "idle_cpu_per_s": round(idle_rate, 3),
        "rss_before_mb": round(mem_before.get("VmRSS", 0), 1),
        "peak_rss_mb": round(mem_after.get("VmHWM", 0), 1),
        "seed_s": round(seed_seconds, 2),
    }


def poll_cycle(backend: str, sizes: Sizes) -> tuple[dict[str, Any], dict[str, Any]]:
    run = poll_cycle_process(
        backend,
        sizes,
        sessions=sizes.poll_sessions,
        concurrency=sizes.poll_concurrency,
        channels=sizes.poll_channels,
        terminal=sizes.poll_terminal,
    )
    ratio = run["cycle_ratio_to_ideal"]
    poll = {
        k: run[k]
        for k in (
            "sessions",
            "terminal_sessions",
            "subscriptions",
            "concurrency",
            "together_latency_s",
            "cycle_s",
            "cycle_s_metrics",
            "ideal_s",
            "cycle_ratio_to_ideal",
            "together_requests",
            "together_max_in_flight",
            "failed",
            "seed_s",
        )
    }
    poll["requests_equal_sessions"] = run["together_requests"] == run["sessions"]
    poll["target"] = "cycle <= 1.25 x ideal; Together requests == distinct non-terminal sessions"
    poll["target_met"] = bool(ratio is not None and ratio <= 1.25 and poll["requests_equal_sessions"])
    budget = 0.10 * sizes.poll_interval
    resources = {
        "subscriptions": run["subscriptions"],
        "sessions": run["sessions"],
        "peak_rss_mb": run["peak_rss_mb"],
        "rss_before_cycle_mb": run["rss_before_mb"],
        "rss_ratio_to_150mb": round(run["peak_rss_mb"] / 150, 3),
        "cpu_s_per_cycle": run["cpu_s"],
        "cpu_s_per_cycle_idle_corrected": run["cpu_s_idle_corrected"],
        "interval_s": sizes.poll_interval,
        "cpu_ratio_to_10pct_interval": round(run["cpu_s"] / budget, 3),
        "target": f"peak RSS < 150 MB; CPU per cycle < {budget:.1f} s (10% of the interval)",
        "target_met": run["peak_rss_mb"] < 150 and run["cpu_s"] < budget,
    }
    return poll, resources


def naive_baseline(backend: str, sizes: Sizes, concurrent: dict[str, Any]) -> dict[str, Any]:
    run = poll_cycle_process(
        backend,
        sizes,
        sessions=sizes.naive_sessions,
        concurrency=1,
        channels=sizes.poll_channels,
        terminal=0,
    )
    per_session_naive = run["cycle_s"] / run["sessions"]
    per_session = concurrent["cycle_s"] / concurrent["sessions"]
    scaled = per_session_naive * concurrent["sessions"]
    return {
        "sessions": run["sessions"],
        "concurrency": 1,
        "cycle_s": run["cycle_s"],
        "ideal_s": run["ideal_s"],
        "cycle_ratio_to_ideal": run["cycle_ratio_to_ideal"],
        "together_requests": run["together_requests"],
        "scaled_cycle_s_at_poll_sessions": round(scaled, 2),
        "speedup_vs_concurrent": round(per_session_naive / per_session, 2),
        "target": "shown for comparison (speed-up of the concurrent poll)",
        "target_met": per_session_naive > per_session,
    }


# -- 3. fan-out and pacing ----------------------------------------------------------------------


def _change_all(together: FakeTogether, ids: list[str]) -> float:
    started = time.monotonic()
    for sid in ids:
        together.set_status(sid, "STOPPING")
    return started


def fanout(backend: str, sizes: Sizes) -> dict[str, Any]:
    n = sizes.fanout_sessions
    interval = sizes.fanout_interval
    with (
        database(backend) as db,
        FakeSlack(latency=sizes.slack_latency) as slack,
        FakeTogether(latency=sizes.poll_latency) as together,
    ):
        ids = seed(
            db.url,
            together,
            sessions=n,
            channels_per_session=1,
            channel_of=lambda i, j: f"CF{i:05d}",
        )
        make_due(db.url)
        env = {
            "POLL_INTERVAL_SECONDS": str(interval),
            "POLL_CONCURRENCY": str(sizes.poll_concurrency),
            "TOGETHER_MAX_RPS": "10000",
            "CHANNEL_MIN_INTERVAL_SECONDS": str(sizes.channel_gap),
            "DELIVERY_INTERVAL_SECONDS": "1",
        }
        with Bot(db_url=db.url, slack=slack, together=together, env=env) as bot:
            first = bot.wait_cycle(sessions=n, timeout=60)  # every session polled once
            seen = len(bot.cycles())
            changed_at = _change_all(together, ids)
            change_spread = time.monotonic() - changed_at

            def replies() -> list[Any]:
                return [c for c in slack.successful_posts() if c.thread_ts]

            timeout = interval + 60 + n * 0.05
            try:
                slack.wait_for(lambda: len(replies()) >= n, timeout=timeout)
            except AssertionError:
                pass
            posts = replies()
            cycle = bot.wait_cycle(sessions=n, after=seen - 1, transitions=n, timeout=5)
            per_channel: dict[str, int] = {}
            for c in posts:
                per_channel[c.channel or ""] = per_channel.get(c.channel or "", 0) + 1
    times = sorted(c.at for c in posts)
    last = times[-1] - changed_at if times else float("nan")
    first_post = times[0] - changed_at if times else float("nan")
    budget = interval + 5.0
    return {
        "sessions": n,
        "channels": n,
        "poll_interval_s": interval,
        "first_cycle_s": first[3],
        "set_status_spread_s": round(change_spread, 2),
        "detect_cycle_s": cycle[3],
        "posts": len(posts),
        "change_to_first_post_s": round(first_post, 2),
        "change_to_last_post_s": round(last, 2),
        "delivery_span_s": round(times[-1] - times[0], 2) if times else None,
        "max_posts_in_one_channel": max(per_channel.values()) if per_channel else 0,
        "ratio_to_interval_plus_5s": round(last / budget, 3),
        "target": f"all {n} told within poll interval + 5 s = {budget:.0f} s",
        "target_met": len(posts) == n and last <= budget,
    }


def pacing(backend: str, sizes: Sizes) -> dict[str, Any]:
    n = sizes.pacing_sessions
    gap = sizes.channel_gap
    with (
        database(backend) as db,
        FakeSlack(latency=sizes.slack_latency) as slack,
        FakeTogether(latency=sizes.poll_latency) as together,
    ):
        ids = seed(
            db.url, together, sessions=n, channels_per_session=1, channel_of=lambda i, j: "CPACE"
        )
        make_due(db.url)
        env = {
            "POLL_INTERVAL_SECONDS": str(sizes.pacing_interval),
            "CHANNEL_MIN_INTERVAL_SECONDS": str(gap),
            "DELIVERY_INTERVAL_SECONDS": "0.2",
        }
        with Bot(db_url=db.url, slack=slack, together=together, env=env) as bot:
            bot.wait_cycle(sessions=n, timeout=60)
            changed_at = _change_all(together, ids)

            def replies() -> list[Any]:
                return [c for c in slack.successful_posts("CPACE") if c.thread_ts]

            try:
                slack.wait_for(lambda: len(replies()) >= n, timeout=30 + n * gap * 2)
            except AssertionError:
                pass
            time.sleep(min(2.0, gap * 2))  # nothing more may arrive
            posts = replies()
    times = sorted(c.at for c in posts)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    min_gap = min(gaps) if gaps else None
    distinct = len({c.thread_ts for c in posts})
    return {
        "sessions": n,
        "channel": "CPACE",
        "channel_min_interval_s": gap,
        "posts": len(posts),
        "distinct_threads": distinct,
        "min_gap_s": round(min_gap, 3) if min_gap is not None else None,
        "mean_gap_s": round(statistics.mean(gaps), 3) if gaps else None,
        "change_to_last_post_s": round(times[-1] - changed_at, 2) if times else None,
        "target": f"all {n} posted, none dropped or repeated, >= ~{gap:.0f} s apart",
        "target_met": len(posts) == n and distinct == n and (min_gap or gap) >= 0.95 * gap,
    }
