"""The `chaos` stress scenario: replicas on one PostgreSQL database killed -9, every
connection to it cut, Slack answering 500, while watched sessions change status.

Besides the targets' figures it reports when each fault came (`faults_at_s`) and
the slowest changes (`slowest`: when, which status, how long to its post), both
in seconds from the first change, so a slow change can be laid beside the fault
that held it.

`RLBOT_BENCH_CHAOS` makes the faults harsher than the sizes', for a run that
looks for trouble: `cut_seconds=10,slack_outage_seconds=8,kill_every=10` (any of
`StressSizes`' `chaos_*` fields, without the prefix)."""

from __future__ import annotations

import dataclasses
import os
import random
import threading
import time
from collections import Counter
from contextlib import suppress
from typing import Any

from bench.env import PG_BASE, Bot, database, make_due, scalar, seed
from bench.stress import StressSizes, _bot, _pct, _repeats, _told
from bot.simulated import FakeSlack, FakeTogether
from tests.support import pg_admin

# -- chaos --------------------------------------------------------------------------------------


def _cut(name: str, seconds: float) -> int:
    """Cut every connection to database `name` for `seconds` (cut again as they come back)."""
    cuts, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        with suppress(Exception):
            pg_admin(
                PG_BASE,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{name}' AND pid <> pg_backend_pid()",
            )
            cuts += 1
        time.sleep(0.2)
    return cuts


def harsher(sizes: StressSizes) -> StressSizes:
    """`sizes` with `RLBOT_BENCH_CHAOS`'s overrides."""
    spec = os.environ.get("RLBOT_BENCH_CHAOS", "")
    fields = {f.name: f.type for f in dataclasses.fields(sizes)}
    over: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, value = item.partition("=")
        key = f"chaos_{name.strip()}"
        if key not in fields:
            raise ValueError(f"RLBOT_BENCH_CHAOS: no chaos setting {name!r}")
        over[key] = int(value) if fields[key] in (int, "int") else float(value)
    return dataclasses.replace(sizes, **over)


def chaos(backend: str, sizes: StressSizes) -> dict[str, Any]:
    sizes = harsher(sizes)
    if backend != "postgresql":
        return {"skipped": "replicas share a PostgreSQL database", "target_met": True}
    n, dwell, moves = sizes.chaos_sessions, sizes.chaos_dwell, sizes.chaos_moves
    path = ["STOPPING" if k % 2 == 0 else "RUNNING" for k in range(moves)] + ["STOPPED"]
    with (
        database(backend) as db,
        FakeSlack() as slack,
        FakeTogether() as together,
    ):
        ids = seed(db.url, together, sessions=n, channels_per_session=1, channel_of=_chaos_ch)
        make_due(db.url)
        name = db.url.rsplit("/", 1)[1]
        bots = [_bot(db.url, slack, together, REPLICA_ID=f"r{i}") for i in range(3)]
        bots = bots[: sizes.chaos_replicas]
        events: Counter[str] = Counter()
        timeline: list[tuple[float, str]] = []
        try:
            deadline = time.monotonic() + 120
            unpolled = "SELECT count(*) FROM watched_sessions WHERE last_polled_at IS NULL"
            while scalar(db.url, unpolled):
                if time.monotonic() > deadline:
                    raise TimeoutError("the replicas never polled every session")
                time.sleep(0.2)
            start = time.monotonic()
            length = (moves + 1) * dwell + dwell
            stop = threading.Event()
            faults = threading.Thread(
                target=_faults,
                args=(sizes, bots, db.url, name, slack, together, start, length),
                kwargs={"stop": stop, "events": events, "timeline": timeline},
            )
            faults.start()
            changed: dict[str, list[tuple[str, float]]] = {s: [] for s in ids}
            plan = sorted(
                (start + (i / n) * dwell + k * dwell, i, status)
                for i in range(n)
                for k, status in enumerate(path)
            )
            for at, i, status in plan:
                time.sleep(max(0.0, at - time.monotonic()))
                together.set_status(ids[i], status)
                changed[ids[i]].append((status, time.monotonic()))
            stop.set()
            faults.join()
            roots = {s: f"{1600000000 + i}.000000" for i, s in enumerate(ids)}

            def all_ended() -> bool:
                return all(
                    _told(slack, _chaos_ch(i, 0), roots[s], changed[s])[0][-1] is not None
                    for i, s in enumerate(ids)
                )

            with suppress(AssertionError):
                slack.wait_for(lambda: all_ended() or None, timeout=90)
            time.sleep(3)  # a late repeat would land now
            delays: list[float] = []
            each: list[tuple[float, float, str, int]] = []  # delay, at, status, session
            untold = terminal_lost = duplicates = 0
            repeats: list[dict[str, Any]] = []
            for i, s in enumerate(ids):
                told, repeated = _told(slack, _chaos_ch(i, 0), roots[s], changed[s])
                duplicates += repeated
                if repeated:
                    repeats += _repeats(slack, _chaos_ch(i, 0), roots[s], since=start)
                delays += [d for d in told if d is not None]
                each += [
                    (d, at - start, status, i)
                    for d, (status, at) in zip(told, changed[s], strict=True)
                    if d is not None
                ]
                untold += sum(1 for d in told[:-1] if d is None)
                terminal_lost += told[-1] is None
            adopted = sum(b.metric('rlbot_leases_adopted_total{work="session"}') or 0 for b in bots)
        finally:
            for b in bots:
                b.stop()
    intermediate = n * moves
    p95 = _pct(delays, 0.95)
    worst = round(max(delays), 2) if delays else None
    met = (
        duplicates == 0
        and terminal_lost == 0
        and p95 is not None
        and p95 <= 15
        and worst is not None
        and worst <= 30
        and untold <= intermediate / 100
    )
    return {
        "replicas": sizes.chaos_replicas,
        "sessions": n,
        "changes": n * len(path),
        "dwell_s": dwell,
        "kills": events["kill"],
        "connection_cuts": sizes.chaos_cuts,
        "backends_terminated": events["terminated"],
        "slack_500s": events["slack_500"],
        "slack_outage_s": sizes.chaos_slack_outage_seconds,
        "cut_s": sizes.chaos_cut_seconds,
        "kill_every_s": sizes.chaos_kill_every,
        "duplicates": duplicates,
        "terminal_lost": terminal_lost,
        "intermediate": intermediate,
        "intermediate_never_told": untold,
        "p50_change_to_post_s": _pct(delays, 0.5),
        "p95_change_to_post_s": p95,
        "max_change_to_post_s": worst,
        "sessions_adopted_by_live_replicas": adopted,
        "faults_at_s": [f"{at:.1f} {what}" for at, what in timeline],
        "slowest": [
            f"{at:.1f} s{i} {status}: {d:.2f} s" for d, at, status, i in sorted(each)[::-1][:12]
        ],
        "repeated_posts": repeats,
        "target": "0 duplicates, 0 terminal lost, p95 <= 15 s, max <= 30 s, untold <= 1 in 100",
        "target_met": met,
    }


def _chaos_ch(i: int, j: int) -> str:
    return f"CX{i:05d}"


def _faults(
    sizes: StressSizes,
    bots: list[Bot],
    db_url: str,
    name: str,
    slack: FakeSlack,
    together: FakeTogether,
    start: float,
    length: float,
    *,
    stop: threading.Event,
    events: Counter[str],
    timeline: list[tuple[float, str]],
) -> None:
    """kill -9 a random replica every `chaos_kill_every` s (a fresh one, under a new
    name, takes its place), cut the database's connections `chaos_cuts` times, and
    make Slack answer 500 `chaos_slack_500s` times, spread over `length` s."""
    rng = random.Random(23)
    at: list[tuple[float, str]] = []
    t = sizes.chaos_kill_every
    while t < length:
        at.append((start + t, "kill"))
        t += sizes.chaos_kill_every
    at += [
        (start + length * (c + 1) / (sizes.chaos_cuts + 1) + 3, "cut")
        for c in range(sizes.chaos_cuts)
    ]
    at += [
        (start + length * (c + 1) / (sizes.chaos_slack_500s + 1) - 2, "slack")
        for c in range(sizes.chaos_slack_500s)
    ]
    born = len(bots)
    for when, what in sorted(at):
        while time.monotonic() < when:
            if stop.wait(0.1):
                return
        timeline.append((time.monotonic() - start, what))
        if what == "kill":
            victim = rng.randrange(len(bots))
            bots[victim].proc.proc.kill()
            bots[victim].proc.proc.wait()
            events["kill"] += 1
            bots[victim].stop()
            bots[victim] = _bot(db_url, slack, together, REPLICA_ID=f"r{born}")
            born += 1
        elif what == "cut":
            events["terminated"] += _cut(name, sizes.chaos_cut_seconds)
        else:
            if sizes.chaos_slack_outage_seconds > 0:
                end = time.monotonic() + sizes.chaos_slack_outage_seconds
                slack.fail_next(
                    "chat.postMessage",
                    status=500,
                    times=1_000_000,
                    when=lambda _params, end=end: time.monotonic() < end,
                )
            else:
                slack.fail_next("chat.postMessage", status=500)
            events["slack_500"] += 1
