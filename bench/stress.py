"""Stress scenarios: `chaos` (replicas killed, database connections cut, Slack
500s) and `burst` (a minute of subscribe commands, then changes), against real
`rl-bot serve` processes at their default settings. They run only when named
(`--only chaos,burst`): each takes minutes at full size.

Every change is timed from `FakeTogether.set_status` to the thread post that
tells it (matched by the new status the post words, in order); a change that a
later one overtook before it was told is "never told"."""

from __future__ import annotations

import random
import re
import statistics
import threading
import time
import uuid
from collections import Counter
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from bench.env import PG_BASE, RUNNING, Bot, database, make_due, scalar, seed, session_id
from bot.simulated import FakeSlack, FakeTogether, make_session
from tests.support import pg_admin

# What "default settings" leaves of the tests' base environment: only what points the
# bot at the fakes, and the spend watch off (the fakes' sessions have no resources).
DEFAULTS_UNSET = (
    "DELIVERY_INTERVAL_SECONDS",
    "LEASE_SECONDS",
    "POLL_INTERVAL_SECONDS",
    "POLL_PLAN",
    "TOGETHER_MAX_RPS",
    "CHANNEL_MIN_INTERVAL_SECONDS",
)
TOLD_RE = re.compile(r"Status changed: .+? → (.+?)\.")


@dataclass(frozen=True)
class StressSizes:
    # chaos: replicas on PostgreSQL, each session moving one status every `dwell` s
    chaos_replicas: int = 3
    chaos_sessions: int = 45
    chaos_moves: int = 3  # intermediate statuses per session, then a terminal one
    chaos_dwell: float = 20.0
    chaos_kill_every: float = 20.0
    chaos_cuts: int = 3
    chaos_cut_seconds: float = 4.0
    chaos_slack_500s: int = 2
    # burst: live sessions in the project, subscribe commands over `burst_seconds`, then
    # `burst_changes` changes over `burst_window` right after, and again a minute later
    burst_live: int = 500
    burst_commands: int = 300
    burst_seconds: float = 60.0
    burst_changes: int = 60
    burst_window: float = 60.0
    burst_settle: float = 60.0  # the commands leave the budget's one-minute window


FULL = StressSizes()
QUICK = StressSizes(
    chaos_sessions=8,
    chaos_moves=2,
    chaos_dwell=8.0,
    chaos_kill_every=10.0,
    chaos_cuts=1,
    chaos_cut_seconds=2.0,
    chaos_slack_500s=1,
    burst_live=120,
    burst_commands=30,
    burst_seconds=10.0,
    burst_changes=8,
    burst_window=10.0,
    burst_settle=10.0,
)


def _bot(db_url: str, slack: FakeSlack, together: FakeTogether, **env: str) -> Bot:
    return Bot(db_url=db_url, slack=slack, together=together, env=env, unset=DEFAULTS_UNSET)


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 2)


def _told(
    slack: FakeSlack, channel: str, root: str, changes: list[tuple[str, float]]
) -> tuple[list[float | None], int]:
    """For each (status, when) change of one session, in order: seconds to the post
    that told it (None: never told); and how many posts repeated a dedupe key."""
    posts = sorted(
        (c for c in slack.successful_posts(channel) if c.thread_ts == root), key=lambda c: c.at
    )
    keys = Counter(
        str(((c.metadata or {}).get("event_payload") or {}).get("dedupe_key")) for c in posts
    )
    delays: list[float | None] = [None] * len(changes)
    k = 0
    for post in posts:
        match = TOLD_RE.search(post.text or "")
        if match is None:
            continue
        said = match.group(1).strip().lower()
        for j in range(k, len(changes)):
            status, at = changes[j]
            if at <= post.at and said.startswith(status.lower()[:5]):
                delays[j] = post.at - at
                k = j + 1
                break
    return delays, sum(n - 1 for n in keys.values() if n > 1)


def _repeats(slack: FakeSlack, channel: str, root: str, *, since: float) -> list[dict[str, Any]]:
    """The posts of a thread whose dedupe key another post already carried: what
    to look for in the bots' logs (`RLBOT_BENCH_KEEP_LOGS`)."""
    posts = sorted(
        (c for c in slack.successful_posts(channel) if c.thread_ts == root), key=lambda c: c.at
    )
    by_key: dict[str, list[Any]] = {}
    for c in posts:
        key = str(((c.metadata or {}).get("event_payload") or {}).get("dedupe_key"))
        by_key.setdefault(key, []).append(c)
    return [
        {
            "channel": channel,
            "dedupe_key": key,
            "at_s": [round(c.at - since, 3) for c in same],
            "ts": [c.ts for c in same],
            "text": (same[0].text or "")[:80],
        }
        for key, same in by_key.items()
        if len(same) > 1
    ]


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


def chaos(backend: str, sizes: StressSizes) -> dict[str, Any]:
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
                kwargs={"stop": stop, "events": events},
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
            untold = terminal_lost = duplicates = 0
            repeats: list[dict[str, Any]] = []
            for i, s in enumerate(ids):
                told, repeated = _told(slack, _chaos_ch(i, 0), roots[s], changed[s])
                duplicates += repeated
                if repeated:
                    repeats += _repeats(slack, _chaos_ch(i, 0), roots[s], since=start)
                delays += [d for d in told if d is not None]
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
        "duplicates": duplicates,
        "terminal_lost": terminal_lost,
        "intermediate": intermediate,
        "intermediate_never_told": untold,
        "p50_change_to_post_s": _pct(delays, 0.5),
        "p95_change_to_post_s": p95,
        "max_change_to_post_s": worst,
        "sessions_adopted_by_live_replicas": adopted,
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
            slack.fail_next("chat.postMessage", status=500)
            events["slack_500"] += 1


# -- burst --------------------------------------------------------------------------------------


def burst(backend: str, sizes: StressSizes) -> dict[str, Any]:
    live = sizes.burst_live
    with database(backend) as db, FakeSlack() as slack, FakeTogether(latency=0.05) as together:
        ids = [session_id(i) for i in range(live)]
        for sid in ids:
            together.put(make_session(sid, RUNNING, checkpoints=0))
        with _bot(db.url, slack, together) as bot:
            # 1. the burst: one subscribe command every burst_seconds / burst_commands
            gap = sizes.burst_seconds / sizes.burst_commands
            began = time.monotonic()
            for i in range(sizes.burst_commands):
                time.sleep(max(0.0, began + i * gap - time.monotonic()))
                token = f"b{i}-{uuid.uuid4().hex[:4]}"
                bot.proc.command(
                    f"subscribe {ids[i]}",
                    response_url=slack.response_url(token),
                    channel_id=_burst_ch(i),
                )
            # 2. changes right after it; 3. again once the commands left the budget's window
            chosen = random.Random(7).sample(range(sizes.burst_commands), 2 * sizes.burst_changes)
            seen = len(bot.cycle_details())
            after = _changes(slack, together, ids, chosen[: sizes.burst_changes], sizes)
            after["interval_in_use_s"] = _interval(bot, seen)
            time.sleep(sizes.burst_settle)
            seen = len(bot.cycle_details())
            steady = _changes(slack, together, ids, chosen[sizes.burst_changes :], sizes)
            steady["interval_in_use_s"] = _interval(bot, seen)
            rss = bot.memory_mb().get("VmHWM")
    ok_after = after["told"] == after["changes"] and after["per_minute"] <= 120
    ok_after = ok_after and (after["mean_s"] or 99) <= 5 and (after["p95_s"] or 99) <= 10
    ok_steady = steady["told"] == steady["changes"] and steady["per_minute"] <= 120
    ok_steady = ok_steady and (steady["mean_s"] or 99) <= 2.5 and (steady["p95_s"] or 99) <= 5
    return {
        "live": live,
        "commands": sizes.burst_commands,
        "commands_over_s": sizes.burst_seconds,
        **{f"after_burst_{k}": v for k, v in after.items()},
        **{f"steady_{k}": v for k, v in steady.items()},
        "peak_rss_mb": round(rss, 1) if rss else None,
        "target": "after the burst: mean <= 5 s, p95 <= 10 s, <= 120 requests/min; "
        "steady: mean <= 2.5 s, p95 <= 5 s; peak RSS <= 120 MB",
        "target_met": ok_after and ok_steady and rss is not None and rss <= 120,
        "target_met_after_burst": ok_after,
        "target_met_steady": ok_steady,
    }


def _interval(bot: Bot, since: int) -> float | None:
    """The median poll interval the bot gave its sessions in the cycles after `since`."""
    given = [d["next_s"] for d in bot.cycle_details()[since:] if d["next_s"]]
    return round(statistics.median(given), 2) if given else None


def _burst_ch(i: int) -> str:
    return f"CB{i:05d}"


def _changes(
    slack: FakeSlack, together: FakeTogether, ids: list[str], chosen: list[int], sizes: StressSizes
) -> dict[str, Any]:
    """Move each chosen subscribed session to STOPPING, spread over `burst_window`;
    the change -> post times and what the bot spent on Together meanwhile."""
    gap = sizes.burst_window / max(1, len(chosen))
    changed: dict[int, float] = {}
    start = time.monotonic()
    for k, i in enumerate(chosen):
        time.sleep(max(0.0, start + k * gap - time.monotonic()))
        together.set_status(ids[i], "STOPPING")
        changed[i] = time.monotonic()
    time.sleep(max(0.0, start + sizes.burst_window - time.monotonic()))
    end = time.monotonic()
    spent = sum(1 for r in list(together.requests) if start <= r.at < end)

    def delay(i: int) -> float | None:
        roots = [c.ts for c in slack.successful_posts(_burst_ch(i)) if c.thread_ts is None]
        if not roots:
            return None
        told, _ = _told(slack, _burst_ch(i), str(roots[0]), [("STOPPING", changed[i])])
        return told[0]

    with suppress(AssertionError):
        slack.wait_for(lambda: all(delay(i) is not None for i in chosen) or None, timeout=90)
    delays = [d for i in chosen if (d := delay(i)) is not None]
    return {
        "changes": len(chosen),
        "told": len(delays),
        "mean_s": round(statistics.mean(delays), 2) if delays else None,
        "p95_s": _pct(delays, 0.95),
        "max_s": round(max(delays), 2) if delays else None,
        "per_minute": round(spent * 60 / (end - start), 1),
    }
