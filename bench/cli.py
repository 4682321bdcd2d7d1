"""`python -m bench [--quick] [--backends sqlite,postgresql] [--save] [--only a,b]`."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.env import available_backends, machine

RESULTS = Path(__file__).resolve().parent / "results"
SCENARIOS = (
    "ack_latency",
    "poll_cycle",
    "poll_plan",
    "db_statements",
    "fanout",
    "pacing",
    "memory_cpu",
    "naive_baseline",
    "rate_limit",
    "few_of_many",
    "change_to_post",
    "change_to_post_spend",
    "change_to_post_today",
    "chaos",
    "burst",
    "chart",
)

# (scenario, key, label) rows of the summary table
TABLE: list[tuple[str, str, str]] = [
    ("ack_latency", "ack_p50_ms", "1 ack p50 (ms)"),
    ("ack_latency", "ack_p99_ms", "1 ack p99 (ms)"),
    ("ack_latency", "ack_p99_ratio_to_3s", "1 ack p99 / 3 s  [<= 0.033]"),
    ("ack_latency", "cards_delivered", "1 cards delivered"),
    ("poll_cycle", "sessions", "2 sessions polled"),
    ("poll_cycle", "cycle_s", "2 cycle (s)"),
    ("poll_cycle", "ideal_s", "2 ideal = n x latency / concurrency (s)"),
    ("poll_cycle", "cycle_ratio_to_ideal", "2 cycle / ideal  [<= 1.25]"),
    ("poll_cycle", "together_requests", "2 Together requests per cycle"),
    ("poll_plan", "plan", "13 poll plan taken (2,000 live watched)"),
    ("poll_plan", "together_requests", "13 Together requests per cycle  [<= 25]"),
    ("poll_plan", "requests_ratio_to_today", "13 ... / per-session GETs (scenario 2)"),
    ("poll_plan", "cycle_s", "13 cycle (s)  [<= 1.5]"),
    ("poll_plan", "cycle_ratio_to_today", "13 ... / per-session GET cycle (scenario 2)"),
    ("poll_plan", "next_interval_s", "13 interval the budget allows (s)"),
    ("db_statements", "steady_SMALL_statements", "2 DB statements, steady, SMALL subs"),
    ("db_statements", "steady_LARGE_statements", "2 DB statements, steady, LARGE subs"),
    ("db_statements", "transitions_SMALL_statements", "2 DB statements, all change, SMALL subs"),
    ("db_statements", "transitions_LARGE_statements", "2 DB statements, all change, LARGE subs"),
    ("db_statements", "steady_LARGE_write_s", "2 write phase, steady (s)"),
    ("db_statements", "transitions_LARGE_write_s", "2 write phase, all change (s)"),
    ("fanout", "change_to_last_post_s", "3 change -> last post (s)"),
    ("fanout", "ratio_to_interval_plus_5s", "3 ... / (interval + 5 s)  [<= 1]"),
    ("fanout", "posts", "3 thread posts"),
    ("pacing", "posts", "3 paced posts in one channel"),
    ("pacing", "min_gap_s", "3 min gap between them (s)  [>= ~1]"),
    ("memory_cpu", "peak_rss_mb", "4 peak RSS, poll plan (MB)  [<= 120]"),
    ("memory_cpu", "today_peak_rss_mb", "4 peak RSS, per-session GETs (MB)"),
    ("memory_cpu", "cpu_s_per_cycle", "4 CPU per cycle (s)"),
    ("memory_cpu", "cpu_ratio_to_10pct_interval", "4 CPU / (10% of interval)  [< 1]"),
    ("naive_baseline", "cycle_s", "5 naive cycle, concurrency 1 (s)"),
    ("naive_baseline", "scaled_cycle_s_at_poll_sessions", "5 naive, scaled to scenario 2 (s)"),
    ("naive_baseline", "speedup_vs_concurrent", "5 speed-up of concurrency"),
    ("rate_limit", "max_rps", "6 TOGETHER_MAX_RPS"),
    ("rate_limit", "busiest_1s_window", "6 most requests in any 1 s"),
    ("rate_limit", "requests_during_retry_after", "6 requests during a 429's Retry-After"),
    ("few_of_many", "first_cycle_requests", "13 few of many: first cycle requests (a look)"),
    ("few_of_many", "steady_requests", "13 few of many: requests per cycle  [= watched]"),
    ("change_to_post", "mean_change_to_post_s", "13 mean change -> post (s)  [<= 10]"),
    ("change_to_post", "together_requests_per_s", "13 Together requests/s  [<= 2]"),
    ("change_to_post", "interval_in_use_s", "13 interval in use (s)"),
    ("change_to_post_spend", "mean_change_to_post_s", "13 spend watch on: change -> post (s)"),
    ("change_to_post_spend", "together_requests_per_s", "13 spend watch on: requests/s  [<= 2]"),
    ("change_to_post_spend", "interval_in_use_s", "13 spend watch on: interval (s)"),
    ("change_to_post_today", "mean_change_to_post_s", "13 today: mean change -> post (s)"),
    ("change_to_post_today", "together_requests_per_s", "13 today: Together requests/s"),
    ("chaos", "duplicates", "chaos: duplicates  [= 0]"),
    ("chaos", "terminal_lost", "chaos: terminal states lost  [= 0]"),
    ("chaos", "p95_change_to_post_s", "chaos: p95 change -> post (s)  [<= 15]"),
    ("chaos", "max_change_to_post_s", "chaos: max change -> post (s)  [<= 30]"),
    ("chaos", "intermediate_never_told", "chaos: intermediate statuses never told"),
    ("chaos", "kills", "chaos: replicas killed -9"),
    ("burst", "after_burst_mean_s", "burst: after, mean change -> post (s)  [<= 5]"),
    ("burst", "after_burst_p95_s", "burst: after, p95 change -> post (s)  [<= 10]"),
    ("burst", "after_burst_per_minute", "burst: after, Together requests/min  [<= 120]"),
    ("burst", "steady_mean_s", "burst: steady, mean change -> post (s)  [<= 2.5]"),
    ("burst", "steady_p95_s", "burst: steady, p95 change -> post (s)  [<= 5]"),
    ("burst", "steady_per_minute", "burst: steady, Together requests/min  [<= 120]"),
    ("burst", "peak_rss_mb", "burst: peak RSS (MB)  [< 110]"),
    ("chart", "click_to_upload_first_s", "25 chart click -> upload, first (s)  [<= 3]"),
    ("chart", "click_to_upload_warm_s", "25 chart click -> upload, warm (s)  [<= 3]"),
    ("chart", "click_to_upload_cached_s", "25 chart click -> upload, cached (s)"),
    ("chart", "render_first_s", "25 chart render, first with import (s)"),
    ("chart", "render_warm_s", "25 chart render, warm (s)  [<= 0.5]"),
    ("chart", "rss_idle_mb", "25 RSS idle, before any chart (MB)"),
    ("chart", "rss_growth_mb", "25 RSS growth after charts (MB)  [<= 60]"),
]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="small sizes (CI): well under a minute")
    p.add_argument(
        "--backends",
        default=None,
        help="comma-separated: sqlite,postgresql (default: sqlite, plus postgresql if reachable)",
    )
    p.add_argument(
        "--save",
        action="store_true",
        help="write bench/results/latest.json and bench/results/RESULTS.md",
    )
    p.add_argument("--only", default=None, help="comma-separated scenario names to run")
    p.add_argument("--json-out", default=None, help="also write the JSON to this path")
    p.add_argument("--slack-latency", type=float, default=None, help="seconds per Slack call")
    p.add_argument(
        "--fanout-interval", type=float, default=None, help="POLL_INTERVAL_SECONDS for scenario 3"
    )
    return p


def run_backend(backend: str, sizes: Any, only: set[str]) -> dict[str, Any]:
    from bench import inproc, scenarios

    out: dict[str, Any] = {}

    def step(name: str, fn: Callable[[], Any]) -> Any:
        started = time.monotonic()
        print(f"[{backend}] {name} ...", file=sys.stderr, flush=True)
        try:
            value = fn()
        except Exception as exc:
            traceback.print_exc()
            value = {"error": f"{type(exc).__name__}: {exc}"[:2000], "target_met": False}
        print(f"[{backend}] {name} done in {time.monotonic() - started:.1f}s", file=sys.stderr)
        return value

    wanted = lambda name: not only or name in only  # noqa: E731
    if wanted("ack_latency"):
        out["ack_latency"] = step("ack_latency", lambda: scenarios.ack_latency(backend, sizes))
    plan_wanted = wanted("poll_plan") or wanted("memory_cpu")
    if wanted("poll_cycle") or wanted("naive_baseline") or plan_wanted:
        today = step("poll_cycle", lambda: scenarios.poll_cycle(backend, sizes))
        out["poll_cycle"] = today[0] if isinstance(today, tuple) else today
    if plan_wanted:
        both = step(
            "poll_plan", lambda: scenarios.poll_plan(backend, sizes, out.get("poll_cycle", {}))
        )
        if isinstance(both, tuple):
            out["poll_plan"], out["memory_cpu"] = both
        else:
            out["poll_plan"] = out["memory_cpu"] = both
    if wanted("db_statements"):
        out["db_statements"] = step("db_statements", lambda: inproc.statements(backend, sizes))
    if wanted("fanout"):
        out["fanout"] = step("fanout", lambda: scenarios.fanout(backend, sizes))
    if wanted("pacing"):
        out["pacing"] = step("pacing", lambda: scenarios.pacing(backend, sizes))
    if wanted("naive_baseline") and "error" not in out.get("poll_cycle", {"error": 1}):
        out["naive_baseline"] = step(
            "naive_baseline",
            lambda: scenarios.naive_baseline(backend, sizes, out["poll_cycle"]),
        )
    if wanted("rate_limit"):
        out["rate_limit"] = step("rate_limit", lambda: scenarios.rate_limit(backend, sizes))
    if wanted("few_of_many"):
        out["few_of_many"] = step("few_of_many", lambda: scenarios.few_of_many(backend, sizes))
    if wanted("change_to_post"):
        out["change_to_post"] = step(
            "change_to_post", lambda: scenarios.change_to_post(backend, sizes, today=False)
        )
    if wanted("change_to_post_spend"):
        out["change_to_post_spend"] = step(
            "change_to_post_spend",
            lambda: scenarios.change_to_post(backend, sizes, today=False, spend=True),
        )
    # the stress scenarios take minutes: only when named
    from bench import chaos, stress

    stress_sizes = stress.QUICK if sizes.poll_repeats == 1 else stress.FULL
    for name, scenario in (("chaos", chaos.chaos), ("burst", stress.burst)):
        if name in only:
            out[name] = step(name, lambda s=scenario: s(backend, stress_sizes))
    if wanted("chart"):
        from bench import chart_scenario

        out["chart"] = step(
            "chart", lambda: chart_scenario.chart(backend, points=sizes.chart_points)
        )
    if wanted("change_to_post_today"):
        out["change_to_post_today"] = step(
            "change_to_post_today", lambda: scenarios.change_to_post(backend, sizes, today=True)
        )
    return out


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return "-" if value is None else str(value)


def table(report: dict[str, Any]) -> str:
    backends = list(report["backends"])
    sizes = report["sizes"]
    small, large = (sizes["stmt_sessions"] * c for c in sizes["stmt_channels"])
    rows: list[list[str]] = [["metric", *backends]]
    for scenario, key, label in TABLE:
        key = key.replace("SMALL", f"{small}subs").replace("LARGE", f"{large}subs")
        label = label.replace("SMALL", str(small)).replace("LARGE", str(large))
        cells = []
        for b in backends:
            data = report["backends"][b].get(scenario, {})
            cells.append(_cell(data.get(key)) if "error" not in data else "error")
        rows.append([label, *cells])
    rows.append(["", *["" for _ in backends]])
    for scenario in SCENARIOS:
        cells = []
        for b in backends:
            data = report["backends"][b].get(scenario)
            cells.append("-" if data is None else ("met" if data.get("target_met") else "MISSED"))
        rows.append([f"target: {scenario}", *cells])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, r in enumerate(rows):
        lines.append(
            "| "
            + " | ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
            + " |"
        )
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def results_markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    load = m.get("loadavg_1_5_15m", {})
    lines = [
        "# Benchmark results",
        "",
        f"`python -m bench{' --quick' if report['mode'] == 'quick' else ''}` "
        f"({report['mode']} sizes), {m['date']}, {report['total_seconds']} s in all.",
        "",
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory_gb']} GB memory, "
        f"Python {m['python']}. Load average (1, 5, 15 min) at the start: "
        f"{load.get('start')}; after each backend: "
        + ", ".join(f"{k[6:]} {v}" for k, v in load.items() if k.startswith("after_"))
        + ".",
        "",
        "Targets are in brackets; see bench/README.md for what each number means. "
        "The JSON with every number is `latest.json` beside this file.",
        "",
        table(report),
        "",
    ]
    return "\n".join(lines)


def _end_on_signals() -> None:
    """SIGTERM and SIGHUP (a `timeout`, a closed terminal) end the run as Ctrl-C
    does: the scenarios' `with` blocks stop their bot and drop their databases.
    Without this a killed run left its bot running, using CPU through later runs.
    (SIGKILL cannot be caught: after one, look for a stray `bot serve`.)"""

    def end(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, end)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _end_on_signals()
    from bench.scenarios import FULL, QUICK

    sizes = QUICK if args.quick else FULL
    if args.slack_latency is not None:
        sizes = replace(sizes, slack_latency=args.slack_latency)
    if args.fanout_interval is not None:
        sizes = replace(sizes, fanout_interval=args.fanout_interval)
    backends = (
        [b.strip() for b in args.backends.split(",") if b.strip()]
        if args.backends
        else available_backends()
    )
    only = {s.strip() for s in args.only.split(",")} if args.only else set()
    started = time.monotonic()
    report: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "machine": machine(),
        "sizes": {k: getattr(sizes, k) for k in sizes.__dataclass_fields__},
        "backends": {},
    }
    load: dict[str, Any] = {"start": [round(x, 2) for x in os.getloadavg()]}
    for backend in backends:
        report["backends"][backend] = run_backend(backend, sizes, only)
        load[f"after_{backend}"] = [round(x, 2) for x in os.getloadavg()]
    report["machine"]["loadavg_1_5_15m"] = load
    report["total_seconds"] = round(time.monotonic() - started, 1)
    text = json.dumps(report, indent=2, default=str)
    print(table(report))
    print()
    print(text)
    if args.save:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "latest.json").write_text(text + "\n")
        (RESULTS / "RESULTS.md").write_text(results_markdown(report))
    if args.json_out:
        Path(args.json_out).write_text(text + "\n")
    errors = [
        f"{b}/{s}"
        for b, data in report["backends"].items()
        for s, v in data.items()
        if isinstance(v, dict) and "error" in v
    ]
    if errors:
        print(f"scenarios that failed to run: {', '.join(errors)}", file=sys.stderr)
        return 1
    return 0
