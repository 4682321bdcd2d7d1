"""Stress scenarios: `chaos` (`bench.chaos`: replicas killed, database connections
cut, Slack 500s) and `burst` (a minute of subscribe commands, then changes), against
real `rl-bot serve` processes at their default settings. They run only when named
(`--only chaos,burst`): each takes minutes at full size.

Every change is timed from `FakeTogether.set_status` to the thread post that
tells it (matched by the new status the post words, in order); a change that a
later one overtook before it was told is "never told"."""

from __future__ import annotations

import random
import re
import statistics
import time
import uuid
from collections import Counter
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from bench.env import RUNNING, Bot, database, session_id
from bot.simulated import FakeSlack, FakeTogether, make_session

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
    # each Slack fault: one 500 (0), or 500 to every chat.postMessage for this many s
    chaos_slack_outage_seconds: float = 0.0
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
        "steady: mean <= 2.5 s, p95 <= 5 s; peak RSS < 110 MB",
        "target_met": ok_after and ok_steady and rss is not None and rss < 110,
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
