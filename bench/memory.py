"""The `rl-bot serve` process's peak RSS as a black-box run sees it: a cold
process at its **default settings** (only what points it at the fakes is set:
the spend watch on, the production poll plan, leases and paces), 500 live
sessions, 300 `/rl-session subscribe` commands in 300 channels over a minute,
then a status change in every one of the 300 watched sessions over a minute.

    python -m bench.memory [--backend sqlite|postgresql] [--migrated] [--bench-settings] [--imports]

On SQLite the bot starts on a new, empty file and migrates it itself, as
`rl-bot serve` does on its first start; `--migrated` migrates it beforehand from
this process, as the bench's scenarios do (PostgreSQL is always migrated first,
as `rl-bot migrate` would).

`--bench-settings` runs the same with the settings the `burst` scenario keeps
from the tests' environment (`SPEND_WATCH=false`, `LOG_FORMAT=json`), to compare.
`--imports` starts the bot with `PYTHONPROFILEIMPORTTIME=1` and lists the
top-level packages it imported after it was ready (what the traffic pulled in),
and the heaviest modules overall; it costs a little memory, so read the peak of a
run without it. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import time
import uuid
from collections import Counter
from typing import Any

from bench.env import RUNNING, Bot, database, machine, session_id
from bench.stress import _told
from bot.simulated import FakeSlack, FakeTogether, make_session

#: every setting the tests' environment sets beyond pointing the bot at the fakes
TEST_SETTINGS = (
    "CHANNEL_MIN_INTERVAL_SECONDS",
    "DELIVERY_INTERVAL_SECONDS",
    "LEASE_SECONDS",
    "LOG_FORMAT",
    "LOG_LEVEL",
    "POLL_INTERVAL_SECONDS",
    "POLL_PLAN",
    "SPEND_WATCH",
    "TOGETHER_MAX_RPS",
    "TOGETHER_TIMEOUT_SECONDS",
)
IMPORT_RE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)$", re.M)


def _channel(i: int) -> str:
    return f"CM{i:05d}"


def _imports(log: str, ready_at: int) -> dict[str, Any]:
    """Top-level packages first imported after byte `ready_at` of the log, and the
    heaviest imports (cumulative microseconds) of the whole run."""
    late: Counter[str] = Counter()
    heavy: list[tuple[int, str]] = []
    for match in IMPORT_RE.finditer(log):
        name = match.group(4)
        if not match.group(3):  # a top-level import statement
            heavy.append((int(match.group(2)), name))
        if match.start() >= ready_at:
            late[name.split(".")[0]] += 1
    heavy.sort(reverse=True)
    return {
        "after_ready": dict(late.most_common()),
        "heaviest_us": [f"{us} {name}" for us, name in heavy[:25]],
    }


def run(
    backend: str,
    *,
    live: int,
    commands: int,
    seconds: float,
    bench_settings: bool,
    imports: bool,
    migrated: bool,
    extra_env: dict[str, str],
) -> dict[str, Any]:
    env: dict[str, str] = dict(extra_env)
    unset: tuple[str, ...] = TEST_SETTINGS
    if bench_settings:
        env |= {"SPEND_WATCH": "false", "LOG_FORMAT": "json"}
        unset = tuple(s for s in TEST_SETTINGS if s not in env)
    if imports:
        env["PYTHONPROFILEIMPORTTIME"] = "1"
    with database(backend) as db, FakeSlack() as slack, FakeTogether(latency=0.05) as together:
        url = db.url
        if backend == "sqlite" and not migrated:
            url = db.url.replace("rl-bot.db", "fresh.db")  # beside the migrated one
        ids = [session_id(i) for i in range(live)]
        for sid in ids:
            together.put(make_session(sid, RUNNING, checkpoints=0))
        bot = Bot(db_url=url, slack=slack, together=together, env=env, unset=unset)
        try:
            ready_at = len(bot.log())
            rss_ready = bot.memory_mb().get("VmRSS")
            gap = seconds / commands
            began = time.monotonic()
            for i in range(commands):
                time.sleep(max(0.0, began + i * gap - time.monotonic()))
                bot.proc.command(
                    f"subscribe {ids[i]}",
                    response_url=slack.response_url(f"m{i}-{uuid.uuid4().hex[:4]}"),
                    channel_id=_channel(i),
                )
            rss_subscribed = bot.memory_mb().get("VmHWM")
            changed: dict[int, float] = {}
            began = time.monotonic()
            for i in range(commands):
                time.sleep(max(0.0, began + i * gap - time.monotonic()))
                together.set_status(ids[i], "STOPPING")
                changed[i] = time.monotonic()

            def delay(i: int) -> float | None:
                roots = [c.ts for c in slack.successful_posts(_channel(i)) if c.thread_ts is None]
                if not roots:
                    return None
                told, _ = _told(slack, _channel(i), str(roots[0]), [("STOPPING", changed[i])])
                return told[0]

            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and any(delay(i) is None for i in changed):
                time.sleep(1.0)
            told = sum(1 for i in changed if delay(i) is not None)
            memory = bot.memory_mb()
            log = bot.log()
        finally:
            bot.stop()
    out: dict[str, Any] = {
        "backend": backend,
        "settings": "bench (SPEND_WATCH=false, LOG_FORMAT=json)" if bench_settings else "default",
        "migrated_before_start": migrated or backend != "sqlite",
        "env": extra_env,
        "live": live,
        "commands": commands,
        "changes": len(changed),
        "told": told,
        "rss_ready_mb": round(rss_ready or 0, 1),
        "peak_rss_after_commands_mb": round(rss_subscribed or 0, 1),
        "peak_rss_mb": round(memory.get("VmHWM", 0), 1),
        "rss_end_mb": round(memory.get("VmRSS", 0), 1),
        "target": "peak RSS < 110 MB",
        "target_met": memory.get("VmHWM", 999) < 110,
    }
    if imports:
        out["imports"] = _imports(log, ready_at)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    parser.add_argument("--backend", default="sqlite", choices=("sqlite", "postgresql"))
    parser.add_argument("--live", type=int, default=500)
    parser.add_argument("--commands", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--bench-settings", action="store_true")
    parser.add_argument("--imports", action="store_true")
    parser.add_argument("--migrated", action="store_true")
    parser.add_argument("--env", action="append", default=[], help="NAME=value for the bot")
    args = parser.parse_args()
    result = run(
        args.backend,
        live=args.live,
        commands=args.commands,
        seconds=args.seconds,
        bench_settings=args.bench_settings,
        imports=args.imports,
        migrated=args.migrated,
        extra_env=dict(e.split("=", 1) for e in args.env),
    )
    print(json.dumps({"machine": machine(), **result}, indent=2))


if __name__ == "__main__":
    main()
