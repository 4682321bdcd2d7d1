"""The benchmark harness still runs: `python -m bench --quick --backends sqlite`.

Not a performance test (CI machines are shared and noisy): it only proves that
every scenario starts the real bot, runs, and reports numbers.

The scenarios run in a few groups (`--only`), one `python -m bench` each, so that
test workers run them side by side instead of one worker running all of them
in a row at the end of the suite. Scenarios that share a run (the poll cycle, the
poll plan, memory and CPU, the naive baseline) or are compared with each other
stay in one group; together the groups name every scenario once.
"""

from __future__ import annotations

import json
import numbers
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
# One headline number per scenario that must be there and be a number.
HEADLINES = {
    "ack_latency": ("ack_p99_ms", "cards_delivered"),
    "poll_cycle": ("cycle_s", "ideal_s", "together_requests"),
    "db_statements": ("steady_{subs}subs_statements", "transitions_{subs}subs_statements"),
    "fanout": ("change_to_last_post_s", "posts"),
    "pacing": ("min_gap_s", "posts"),
    "memory_cpu": ("peak_rss_mb", "cpu_s_per_cycle"),
    "naive_baseline": ("cycle_s", "speedup_vs_concurrent"),
    "rate_limit": ("busiest_1s_window", "requests_during_retry_after"),
    "poll_plan": ("cycle_s", "together_requests", "requests_ratio_to_today"),
    "few_of_many": ("first_cycle_requests", "steady_requests"),
    "change_to_post": ("mean_change_to_post_s", "together_requests_per_s"),
    "change_to_post_today": ("mean_change_to_post_s", "together_requests_per_s"),
    "chart": ("click_to_upload_warm_s", "render_warm_s", "rss_growth_mb"),
}
SCENARIOS = tuple(HEADLINES)
#: one `python -m bench --only …` each; the poll cycle's group also runs the scenarios
#: made from its run (and the poll plan is compared with it)
GROUPS = {
    "poll": ("poll_cycle", "poll_plan", "memory_cpu", "naive_baseline"),
    "commands": ("ack_latency", "db_statements", "fanout", "pacing"),
    "limits": ("rate_limit", "few_of_many", "change_to_post"),
    "today": ("change_to_post_today",),
    "chart": ("chart",),
}

pytestmark = [pytest.mark.slow, pytest.mark.long("a cold `python -m bench` per group")]


def test_the_groups_name_every_scenario_once() -> None:
    named = [scenario for group in GROUPS.values() for scenario in group]
    assert sorted(named) == sorted(SCENARIOS)


def _bench(tmp_path: Path, group: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--backends",
            "sqlite",
            "--only",
            ",".join(group),
            "--json-out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads(out.read_text()), proc.stdout


@pytest.mark.parametrize("name", GROUPS)
def test_quick_benchmark_runs_every_scenario(tmp_path: Path, name: str) -> None:
    group = GROUPS[name]
    report, stdout = _bench(tmp_path, group)
    assert report["mode"] == "quick"
    results = report["backends"]["sqlite"]
    sizes = report["sizes"]
    subs = sizes["stmt_sessions"] * sizes["stmt_channels"][-1]
    for scenario in group:
        data = results.get(scenario)
        assert isinstance(data, dict), f"{scenario} missing"
        assert "error" not in data, f"{scenario}: {data.get('error')}"
        assert isinstance(data.get("target_met"), bool), scenario
        for key in HEADLINES[scenario]:
            key = key.format(subs=subs)
            value = data.get(key)
            assert isinstance(value, numbers.Real) and not isinstance(value, bool), (
                f"{scenario}.{key} = {value!r}"
            )
    # The properties the harness exists to show hold even at smoke size.
    if name == "poll":
        # One GET per session (a retry after a timeout on a loaded machine may add a few).
        polled = results["poll_cycle"]
        assert polled["sessions"] <= polled["together_requests"] < 2 * polled["sessions"]
        # The poll plan: many watched sessions are learnt from list pages, a few by their GETs.
        assert results["poll_plan"]["plan"] == "list"
        assert (
            results["poll_plan"]["together_requests"] < results["poll_cycle"]["together_requests"]
        )
    if name == "commands":
        assert results["db_statements"]["statements_constant_in_subscriptions"] is True
        assert results["ack_latency"]["cards_delivered"] == results["ack_latency"]["commands"]
        assert results["pacing"]["posts"] == results["pacing"]["sessions"]
    if name == "limits":
        assert results["few_of_many"]["steady_requests"] == sizes["few_watched"]
    assert "| metric" in stdout  # the table is printed
