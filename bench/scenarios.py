"""The throughput and latency scenarios. Each takes a backend and a `Sizes` and returns a flat dict
of numbers (plus `target` / `target_met`), so the table and the JSON come from the same place.

The poll plan is measured side by side with two baselines in the same run: the
per-session GET poller at today's defaults (`poll_cycle`, `change_to_post_today`) and the
naive one at concurrency 1 (`naive_baseline`); ratios are reported, not only seconds."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from bench.env import (
    Bot,
    Database,
    add_unwatched,
    database,
    make_due,
    scalar,
    seed,
)
from bot.simulated import FakeSlack, FakeTogether, sign, slash_command_body
from tests.support import SIGNING_SECRET

SLACK_ACK_LIMIT = 3.0
WARMUP = 5


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
    poll_repeats: int = 3
    # 2b. statements per cycle, in-process, at two subscription counts
    stmt_sessions: int = 2000
    stmt_channels: tuple[int, int] = (1, 5)
    # 3. fan-out and pacing
    fanout_sessions: int = 500
    fanout_interval: float = 60.0  # the production default
    pacing_sessions: int = 20
    pacing_interval: float = 2.0
    channel_gap: float = 1.0
    # 5. naive baseline
    naive_sessions: int = 200
    # 6. rate limits
    limit_sessions: int = 200
    limit_max_rps: float = 50.0
    # 7. the poll plan: a few watched sessions in a large project
    few_watched: int = 5
    project_live: int = 3000
    # 8. the poll plan: change -> thread post at default settings, against the GET poller
    latency_sessions: int = 2000
    latency_changes: int = 45
    latency_window: float = 90.0
    latency_interval: float = 60.0  # POLL_INTERVAL_SECONDS, the production default
    latency_min_interval: float = 5.0  # POLL_MIN_INTERVAL_SECONDS, the production default
    # ... with the spend watch on: a window longer than SPEND_REFRESH_SECONDS (300 s by
    # default), so its requests include a refresh of every resource, at the same rate
    # of changes (one every 2 s)
    spend_window: float = 330.0
    spend_changes: int = 165
    # Slack answers every call after this long
    slack_latency: float = 0.0
    # 25. chart: W&B points per series (2 series)
    chart_points: int = 1000


FULL = Sizes()
QUICK = Sizes(
    ack_commands=20,
    ack_concurrency=10,
    ack_together_latency=0.3,
    poll_sessions=100,
    poll_channels=5,
    poll_terminal=10,
    poll_latency=0.02,
    poll_interval=2.0,  # a 2 s scheduler tick: less waiting for the cycle to start
    poll_repeats=1,
    stmt_sessions=40,
    fanout_sessions=20,
    fanout_interval=2.0,
    pacing_sessions=3,
    naive_sessions=20,
    limit_sessions=20,
    limit_max_rps=20.0,
    few_watched=3,
    project_live=250,
    latency_sessions=150,
    latency_changes=6,
    latency_window=6.0,
    latency_interval=4.0,
    latency_min_interval=1.0,
    spend_window=6.0,
    spend_changes=6,
    chart_points=100,
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
        every = seed(db.url, together, sessions=n + WARMUP, channels_per_session=0)
        ids, warm_ids = every[:n], every[n:]
        together.latency = sizes.ack_together_latency
        with Bot(db_url=db.url, slack=slack, together=together, env={}) as bot:
            # A few commands one at a time first: Bolt and the clients set themselves up
            # on the first requests; those one-off costs are reported, not averaged in.
            warm, _ = asyncio.run(_send_commands(bot.url, slack, warm_ids, 1, prefix="warm"))
            started = time.monotonic()
            acks, statuses = asyncio.run(
                _send_commands(bot.url, slack, ids, sizes.ack_concurrency, prefix="ack")
            )
            tokens = [f"ack-{i}" for i in range(n)]
            timeout = 30 + n * sizes.ack_together_latency / 8

            def delivered() -> int:
                return sum(1 for t in tokens if slack.responses.get(t))

            with contextlib.suppress(AssertionError):
                slack.wait_for(lambda: delivered() >= n, timeout=timeout)
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
        "warmup_commands": WARMUP,
        "first_cold_ack_ms": round(warm[0] * 1000, 1) if warm else None,
        "ack_p99_ratio_to_3s": round(p99 / SLACK_ACK_LIMIT, 4),
        "server_ack_mean_ms": round(server_sum / server_count * 1000, 2) if server_count else None,
        "cards_delivered": cards,
        "all_answered_s": round(all_in, 2),
        "target": "p99 < 100 ms (ratio <= 0.033) and every card delivered",
        "target_met": p99 < 0.1 and cards == n,
    }


async def _send_commands(
    url: str, slack: FakeSlack, ids: list[str], concurrency: int, *, prefix: str
) -> tuple[list[float], list[int]]:
    """POST one signed `/rl-session <id>` per id, `concurrency` at a time; ack times."""
    import aiohttp

    semaphore = asyncio.Semaphore(concurrency)
    acks: list[float] = []
    statuses: list[int] = []
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def one(i: int, sid: str) -> None:
            body = slash_command_body(
                sid,
                response_url=slack.response_url(f"{prefix}-{i}"),
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
    backend: str,
    sizes: Sizes,
    *,
    sessions: int,
    concurrency: int,
    channels: int,
    terminal: int,
    repeats: int = 1,
    plan: str = "get",
    unwatched: int = 0,
) -> dict[str, Any]:
    """`repeats` poll cycles over `sessions` due sessions in one real `rl-bot serve`.

    Sessions are seeded due in 2100; after the bot is up (and its idle CPU rate
    measured) they are made due, and the next scheduler tick polls them all.
    `plan` is POLL_PLAN; `unwatched` more live sessions are in the project (the
    fake) but watched by nobody.
    """
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
        add_unwatched(together, unwatched)
        seed_seconds = time.monotonic() - seed_started
        together.latency = latency
        env = {
            "POLL_INTERVAL_SECONDS": str(sizes.poll_interval),
            "POLL_CONCURRENCY": str(concurrency),
            "TOGETHER_MAX_RPS": "10000",
            "POLL_PLAN": plan,
        }
        if plan == "get":  # today's poller: a fixed interval, all due in one claim
            env["POLL_MIN_INTERVAL_SECONDS"] = str(sizes.poll_interval)
            env["POLL_BATCH_SIZE"] = str(max(5000, sessions))
            # the cycle's speed is measured, not the budget (a round of 2,000 GETs
            # waits for its share: change_to_post and burst measure the budget)
            env["TOGETHER_REQUESTS_PER_MINUTE"] = "0"
        ideal = sessions * latency / concurrency
        cycles: list[dict[str, Any]] = []
        with Bot(db_url=db.url, slack=slack, together=together, env=env) as bot:
            time.sleep(0.5)
            idle0, t0 = bot.cpu_seconds(), time.monotonic()
            time.sleep(1.0)
            idle_rate = (bot.cpu_seconds() - idle0) / (time.monotonic() - t0)
            mem_before = bot.memory_mb()
            for _ in range(repeats):
                seen = len(bot.cycles())
                together.reset_counts()
                req_sum = bot.metric("rlbot_together_request_seconds_sum") or 0.0
                req_count = bot.metric("rlbot_together_request_seconds_count") or 0.0
                cpu0, wall0 = bot.cpu_seconds(), time.monotonic()
                make_due(db.url)
                cycle = bot.wait_cycle(sessions=sessions, after=seen, timeout=60 + ideal * 4)
                detail = bot.cycle_details()[bot.last_cycle_index]
                cpu = bot.cpu_seconds() - cpu0
                wall = time.monotonic() - wall0
                time.sleep(0.2)
                req_sum = (bot.metric("rlbot_together_request_seconds_sum") or 0.0) - req_sum
                req_count = (bot.metric("rlbot_together_request_seconds_count") or 0.0) - req_count
                cycles.append(
                    {
                        "cycle_s": cycle[3],
                        "failed": cycle[1],
                        "plan": detail["plan"],
                        "list_pages": detail["list_pages"],
                        "gets": detail["gets"],
                        "next_interval_s": detail["next_s"],
                        "together_requests": together.total_requests,
                        "max_in_flight": together.max_in_flight,
                        "cpu_s": cpu,
                        "cpu_s_idle_corrected": max(0.0, cpu - idle_rate * wall),
                        "together_mean_ms": req_sum / req_count * 1000 if req_count else None,
                    }
                )
            mem_after = bot.memory_mb()
            subs = scalar(db.url, "SELECT count(*) FROM subscriptions WHERE active")
    times = [c["cycle_s"] for c in cycles]
    seconds = statistics.median(times)
    cpu = statistics.median(c["cpu_s"] for c in cycles)
    return {
        "sessions": sessions,
        "terminal_sessions": terminal,
        "unwatched_live_sessions": unwatched,
        "subscriptions": subs,
        "plan": cycles[-1]["plan"],
        "plan_each": [c["plan"] for c in cycles],
        "list_pages": cycles[-1]["list_pages"],
        "gets": cycles[-1]["gets"],
        "next_interval_s": cycles[-1]["next_interval_s"],
        "concurrency": concurrency,
        "together_latency_s": latency,
        "cycles_run": len(cycles),
        "cycle_s": round(seconds, 3),
        "cycle_s_each": [round(t, 2) for t in times],
        "ideal_s": round(ideal, 3),
        "cycle_ratio_to_ideal": round(seconds / ideal, 3) if ideal else None,
        "best_ratio_to_ideal": round(min(times) / ideal, 3) if ideal else None,
        "together_requests": max(c["together_requests"] for c in cycles),
        "together_requests_each": [c["together_requests"] for c in cycles],
        "together_max_in_flight": max(c["max_in_flight"] for c in cycles),
        "together_mean_ms_seen_by_bot": round(
            statistics.median(c["together_mean_ms"] or 0 for c in cycles), 1
        ),
        "failed": max(c["failed"] for c in cycles),
        "cpu_s": round(cpu, 2),
        "cpu_s_each": [round(c["cpu_s"], 2) for c in cycles],
        "cpu_s_idle_corrected": round(
            statistics.median(c["cpu_s_idle_corrected"] for c in cycles), 2
        ),
        "idle_cpu_per_s": round(idle_rate, 3),
        "rss_before_mb": round(mem_before.get("VmRSS", 0), 1),
        "peak_rss_mb": round(mem_after.get("VmHWM", 0), 1),
        "seed_s": round(seed_seconds, 2),
    }


def _poll_sized_run(backend: str, sizes: Sizes, *, plan: str) -> dict[str, Any]:
    """`poll_cycle_process` at the poll scenario's sizes, with this poll plan: scenario 2
    and the poll plan's run differ only in the plan."""
    return poll_cycle_process(
        backend,
        sizes,
        sessions=sizes.poll_sessions,
        concurrency=sizes.poll_concurrency,
        channels=sizes.poll_channels,
        terminal=sizes.poll_terminal,
        repeats=sizes.poll_repeats,
        plan=plan,
    )


def poll_cycle(backend: str, sizes: Sizes) -> tuple[dict[str, Any], dict[str, Any]]:
    """The per-session GET poller at today's defaults (`POLL_PLAN=get`, a fixed
    interval): scenario 2, and the poll plan's baseline. Also returns the run."""
    run = _poll_sized_run(backend, sizes, plan="get")
    ratio = run["cycle_ratio_to_ideal"]
    poll = {
        k: run[k]
        for k in (
            "sessions",
            "terminal_sessions",
            "subscriptions",
            "concurrency",
            "together_latency_s",
            "cycles_run",
            "cycle_s",
            "cycle_s_each",
            "ideal_s",
            "cycle_ratio_to_ideal",
            "best_ratio_to_ideal",
            "together_requests",
            "together_requests_each",
            "together_max_in_flight",
            "together_mean_ms_seen_by_bot",
            "failed",
            "seed_s",
        )
    }
    poll["requests_equal_sessions"] = all(
        n == run["sessions"] for n in run["together_requests_each"]
    )
    poll["peak_rss_mb"] = run["peak_rss_mb"]
    poll["cpu_s_per_cycle"] = run["cpu_s"]
    poll["target"] = "cycle <= 1.25 x ideal; Together requests == distinct non-terminal sessions"
    poll["target_met"] = bool(
        ratio is not None and ratio <= 1.25 and poll["requests_equal_sessions"]
    )
    return poll, run


def poll_plan(
    backend: str, sizes: Sizes, today: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The poll plan: the same 2,000 live watched sessions (10,000 subscriptions) with
    the poll plan at its defaults (`POLL_PLAN=auto`), against `today` (scenario 2,
    same run). Returns the plan's numbers and its memory and CPU (scenario 4)."""
    run = _poll_sized_run(backend, sizes, plan="auto")
    n = run["sessions"]
    requests = run["together_requests"]
    max_requests = max(math.ceil(n / 100) + 5, math.ceil(25 * n / 2000))
    max_cycle = 1.5 * max(1.0, n / 2000)
    out = {
        k: run[k]
        for k in (
            "sessions",
            "subscriptions",
            "plan",
            "list_pages",
            "gets",
            "together_latency_s",
            "cycles_run",
            "cycle_s",
            "cycle_s_each",
            "together_requests",
            "together_requests_each",
            "next_interval_s",
            "failed",
        )
    }
    out |= {
        "today_together_requests": today.get("together_requests"),
        "requests_ratio_to_today": _ratio(requests, today.get("together_requests")),
        "today_cycle_s": today.get("cycle_s"),
        "cycle_ratio_to_today": _ratio(run["cycle_s"], today.get("cycle_s")),
        "target": f"<= {max_requests} Together requests a cycle and cycle <= {max_cycle:.1f} s "
        f"({n} live watched, {run['together_latency_s'] * 1000:.0f} ms latency)",
        "target_met": requests <= max_requests and run["cycle_s"] <= max_cycle,
    }
    interval = run["next_interval_s"] or sizes.poll_interval
    budget = 0.10 * interval
    max_rss = 120.0
    resources = {
        "subscriptions": run["subscriptions"],
        "sessions": n,
        "plan": run["plan"],
        "peak_rss_mb": run["peak_rss_mb"],
        "rss_before_cycle_mb": run["rss_before_mb"],
        "today_peak_rss_mb": today.get("peak_rss_mb"),
        "rss_ratio_to_today": _ratio(run["peak_rss_mb"], today.get("peak_rss_mb")),
        "cpu_s_per_cycle": run["cpu_s"],
        "cpu_s_per_cycle_each": run["cpu_s_each"],
        "cpu_s_per_cycle_idle_corrected": run["cpu_s_idle_corrected"],
        "today_cpu_s_per_cycle": today.get("cpu_s_per_cycle"),
        "interval_s": interval,
        "cpu_ratio_to_10pct_interval": round(run["cpu_s"] / budget, 3),
        "target": f"peak RSS <= {max_rss:.0f} MB; CPU per cycle < {budget:.1f} s "
        "(10% of the interval in use)",
        "target_met": run["peak_rss_mb"] <= max_rss and run["cpu_s"] < budget,
    }
    return out, resources


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 4) if a is not None and b else None


def few_of_many(backend: str, sizes: Sizes) -> dict[str, Any]:
    """The poll plan: a team watching a few sessions of a large project keeps its GETs.

    The first cycle knows nothing of the project and looks (a list pass bounded by
    what the GETs would cost); every later one is reported as `steady_*`."""
    few, live = sizes.few_watched, sizes.project_live
    run = poll_cycle_process(
        backend,
        sizes,
        sessions=few,
        concurrency=sizes.poll_concurrency,
        channels=1,
        terminal=0,
        repeats=3,
        plan="auto",
        unwatched=live - few,
    )
    first, *steady = run["together_requests_each"]
    steady_plans = run["plan_each"][1:]
    return {
        "watched": few,
        "project_live_sessions": live,
        "first_cycle_requests": first,
        "first_cycle_plan": run["plan_each"][0],
        "steady_requests": max(steady),
        "steady_requests_each": steady,
        "steady_plans": steady_plans,
        "target": f"after the first look, {few} GETs a cycle (the plan picks GETs)",
        "target_met": all(n == few for n in steady) and set(steady_plans) == {"get"},
    }


def change_to_post(
    backend: str, sizes: Sizes, *, today: bool, spend: bool = False
) -> dict[str, Any]:
    """The poll plan: mean time from a change at Together to its thread post, and the
    Together requests a second meanwhile, 2,000 watched sessions at the default
    settings (`today`: the per-session GET poller at a fixed POLL_INTERVAL_SECONDS).
    With `spend`, the spend watch is on as it is by default (the bench's bot runs
    without it otherwise) and each session has its own READY model resource: its
    reads come out of the same request budget.

    Each session has its own channel; `latency_changes` of them change status at
    random moments spread over `latency_window` seconds after the first full poll
    (with `spend`: `spend_changes` over `spend_window`, which holds a refresh of
    every resource)."""
    n = sizes.latency_sessions
    interval = sizes.latency_interval
    window = sizes.spend_window if spend else sizes.latency_window
    changes = sizes.spend_changes if spend else sizes.latency_changes
    with _due_sessions(backend, sizes, n, lambda i, j: f"CL{i:05d}") as (db, slack, together, ids):
        env = {  # otherwise the defaults (the test harness's POLL_PLAN=get undone)
            "POLL_PLAN": "auto",
            "POLL_INTERVAL_SECONDS": str(interval),
            "POLL_MIN_INTERVAL_SECONDS": str(sizes.latency_min_interval),
        }
        if today:
            env |= {"POLL_PLAN": "get", "POLL_MIN_INTERVAL_SECONDS": str(interval)}
        if spend:
            env |= {"SPEND_WATCH": "true"}
            for sid in ids:
                together.add_resource(together.sessions[sid]["model_resources_id"])
        with Bot(db_url=db.url, slack=slack, together=together, env=env) as bot:
            bot.wait_cycle(sessions=n, timeout=120 + n * sizes.poll_latency)  # all seen once
            rng = random.Random(13)
            chosen = rng.sample(range(n), changes)
            gap = window / len(chosen)
            changed: dict[int, float] = {}
            start = time.monotonic()
            for k, i in enumerate(chosen):
                time.sleep(max(0.0, start + (k + rng.random()) * gap - time.monotonic()))
                together.set_status(ids[i], "STOPPING")
                changed[i] = time.monotonic()
            time.sleep(max(0.0, start + window - time.monotonic()))
            end = time.monotonic()
            in_window = [r for r in list(together.requests) if start <= r.at < end]
            spent = len(in_window)
            by_kind = Counter(_REQUEST_KIND.get(r.route, r.route) for r in in_window)

            def posted(i: int) -> float | None:
                root = f"{1600000000 + i}.000000"
                times = [c.at for c in slack.successful_posts(f"CL{i:05d}") if c.thread_ts == root]
                return min(times) if times else None

            with contextlib.suppress(AssertionError):
                slack.wait_for(
                    lambda: all(posted(i) is not None for i in chosen), timeout=interval + 60
                )
            delays = [t - changed[i] for i in chosen if (t := posted(i)) is not None]
            intervals = [d["next_s"] for d in bot.cycle_details()[1:] if d["next_s"]]
    per_s = spent / (end - start)
    mean = statistics.mean(delays) if delays else float("nan")
    told = len(delays) == len(chosen)
    if today:
        target, met = "shown for comparison (today's defaults)", told
    else:
        target = "mean change -> thread post <= 10 s, spending <= 2 Together requests/s"
        met = told and mean <= 10.0 and per_s <= 2.0
    return {
        "sessions": n,
        "changes": len(chosen),
        "told": len(delays),
        "window_s": window,
        "poll_interval_max_s": interval,
        "interval_in_use_s": statistics.median(intervals) if intervals else None,
        "mean_change_to_post_s": round(mean, 2),
        "p50_change_to_post_s": round(statistics.median(delays), 2) if delays else None,
        "max_change_to_post_s": round(max(delays), 2) if delays else None,
        "together_requests_in_window": spent,
        "together_requests_per_s": round(per_s, 2),
        "together_requests_by_kind": dict(sorted(by_kind.items())),
        "target": target,
        "target_met": met,
    }


# The fake's route names (`FakeTogether._route`) as the bot's request budget names
# the kinds (`bot.together.budget`), for the bench's split of a window's requests.
_REQUEST_KIND = {
    "list": "list_page",
    "get": "get",
    "resources": "resource_list_page",
    "resource": "resource_get",
    "estimate": "estimate_cost",
}


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


@contextlib.contextmanager
def _due_sessions(
    backend: str, sizes: Sizes, n: int, channel_of: Callable[[int, int], str]
) -> Iterator[tuple[Database, FakeSlack, FakeTogether, list[str]]]:
    """n sessions due now, one subscription each (in `channel_of(i, 0)`), in a fresh
    database and in the fakes at the bench's Slack and poll latencies; yields their ids."""
    with (
        database(backend) as db,
        FakeSlack(latency=sizes.slack_latency) as slack,
        FakeTogether(latency=sizes.poll_latency) as together,
    ):
        ids = seed(db.url, together, sessions=n, channels_per_session=1, channel_of=channel_of)
        make_due(db.url)
        yield db, slack, together, ids


def _change_all(together: FakeTogether, ids: list[str]) -> float:
    started = time.monotonic()
    for sid in ids:
        together.set_status(sid, "STOPPING")
    return started


def fanout(backend: str, sizes: Sizes) -> dict[str, Any]:
    n = sizes.fanout_sessions
    interval = sizes.fanout_interval
    with _due_sessions(backend, sizes, n, lambda i, j: f"CF{i:05d}") as (db, slack, together, ids):
        env = {
            "POLL_INTERVAL_SECONDS": str(interval),
            "POLL_CONCURRENCY": str(sizes.poll_concurrency),
            "TOGETHER_MAX_RPS": "10000",
            "TOGETHER_REQUESTS_PER_MINUTE": "0",  # the fan-out is measured, not the budget
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
            with contextlib.suppress(AssertionError):
                slack.wait_for(lambda: len(replies()) >= n, timeout=timeout)
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
    with _due_sessions(backend, sizes, n, lambda i, j: "CPACE") as (db, slack, together, ids):
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

            with contextlib.suppress(AssertionError):
                slack.wait_for(lambda: len(replies()) >= n, timeout=30 + n * gap * 2)
            time.sleep(min(2.0, gap * 2))  # nothing more may arrive
            posts = replies()
    times = sorted(c.at for c in posts)
    gaps = [b - a for a, b in itertools.pairwise(times)]
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


# -- 6. Together rate limits: the global cap, and what a 429 does -------------------------------


def rate_limit(backend: str, sizes: Sizes) -> dict[str, Any]:
    """A cycle under `TOGETHER_MAX_RPS`, and one whose first answer is a 429 with Retry-After.

    Shown, not judged against a target number: the cap must hold, and after a
    429 a polite client waits `Retry-After` before its next request to Together.
    """
    n = sizes.limit_sessions
    rps = sizes.limit_max_rps
    retry_after = 2
    with (
        database(backend) as db,
        FakeSlack(latency=sizes.slack_latency) as slack,
        FakeTogether() as together,
    ):
        seed(db.url, together, sessions=n, channels_per_session=1)
        env = {
            "POLL_INTERVAL_SECONDS": str(sizes.poll_interval),
            "POLL_CONCURRENCY": str(sizes.poll_concurrency),
            "TOGETHER_MAX_RPS": str(rps),
            "TOGETHER_REQUESTS_PER_MINUTE": "0",  # the per-second cap is measured
            "POLL_PLAN": "get",  # one request per session: the cap is what is measured
        }
        with Bot(db_url=db.url, slack=slack, together=together, env=env) as bot:
            time.sleep(0.5)
            # 1. the cap: n requests at `rps` take about n / rps seconds
            together.reset_counts()
            make_due(db.url)
            capped = bot.wait_cycle(sessions=n, timeout=60 + 2 * n / rps)
            stamps = sorted(r.at for r in list(together.requests))
            span = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
            busiest = max((sum(1 for t in stamps if s <= t < s + 1.0) for s in stamps), default=0)
            # 2. a 429 with Retry-After on the first request of the next cycle
            together.reset_counts()
            together.fail(None, status=429, headers={"Retry-After": str(retry_after)}, times=1)
            seen = len(bot.cycles())
            make_due(db.url)
            bot.wait_cycle(sessions=n, after=seen, timeout=60 + 2 * n / rps)
            answered = sorted((r.at, r.status) for r in list(together.requests))
    first_429 = next((t for t, status in answered if status == 429), None)
    during = (
        sum(1 for t, _ in answered if first_429 < t < first_429 + retry_after)
        if first_429 is not None
        else None
    )
    return {
        "sessions": n,
        "max_rps": rps,
        "capped_cycle_s": capped[3],
        "min_cycle_s_at_cap": round(n / rps, 2),
        "observed_rps": round((len(stamps) - 1) / span, 1) if span else None,
        "busiest_1s_window": busiest,
        "retry_after_s": retry_after,
        "requests_during_retry_after": during,
        "target": f"<= {rps:.0f} requests in any 1 s; none during Retry-After after a 429",
        "target_met": busiest <= rps * 1.1 + 1 and during == 0,
    }
