"""A W&B read pass with metric rules: 300 sessions, each with a rule (15
channels × 20, the most a channel may hold), read in the card's passes, against
the same pass with no rules. The rules' metrics ride in the request each
session's card read makes anyway, so the request count must not move; the
CPU the rules add is the difference between the two runs.

    python -m bench.rules_pass [--backend sqlite|postgresql] [--sessions 300]

Reported per run: W&B requests, passes, outbox rows the rules wrote, wall and
process CPU seconds (the fake W&B server shares the process: read the delta).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from sqlalchemy import insert, select, text

from bench.env import database, seed
from bot.jobs import metric_reads
from bot.jobs.metric_reads import read_metrics
from bot.runtime import build_runtime
from bot.settings.model import Settings
from bot.simulated import FakeTogether
from bot.simulated.wandb import FakeRun, FakeWandb
from bot.store.queries.session_metrics import due_sessions
from bot.store.rule_tables import MetricRule
from bot.store.tables import db_now, utcnow

PER_CHANNEL = 20


def _rows() -> list[dict[str, Any]]:
    return [{"_step": i, "reward": i / 100, "loss": 1.0, "kl": 0.1 + i / 100} for i in range(100)]


class _Timed:
    """Wall seconds spent inside the rules' own calls of a pass (an upper bound
    on their CPU: it includes the database's round trips)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, name: str) -> None:
        inner = getattr(metric_reads, name)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        setattr(metric_reads, name, timed)


async def _passes(url: str, wandb: FakeWandb, *, rules: bool, ids: list[str]) -> dict[str, Any]:
    settings = Settings(
        _env_file=None,
        database_url=url,
        together_api_key="bench",
        slack_bot_token="xoxb-bench",
        wandb_api_key=wandb.api_key,
        wandb_base_url=wandb.url,
        wandb_requests_per_minute=1_000_000,
        oncall_channel="COPS",
    )
    rt = build_runtime(settings)
    try:
        if rules:
            async with rt.sessionmaker() as db, db.begin():
                await db.execute(
                    insert(MetricRule.__table__),
                    [
                        {
                            "team_id": "T1",
                            "channel_id": f"CR{i // PER_CHANNEL:03d}",
                            "session_id": sid,
                            "metric": "kl",
                            "op": ">",
                            "threshold": 0.5 + (i % 2),  # half of them fire
                            "hold_seconds": 0,
                            "page": False,
                            "created_by": "U1",
                            "created_at": utcnow(),
                        }
                        for i, sid in enumerate(ids)
                    ],
                )
        wandb.reset()
        timed = _Timed()
        if rules:
            timed.wrap("judge_rules")
            timed.wrap("rules_reaching")
        passes = 0
        async with rt.sessionmaker() as db:
            start = (await db.execute(select(db_now()))).scalar_one()
        cpu, wall = time.process_time(), time.perf_counter()
        while passes < 10 * len(ids):
            async with rt.sessionmaker() as db:  # until every session was read once
                if not await due_sessions(db, before=start, limit=1):
                    break
            await read_metrics(rt)
            passes += 1
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        async with rt.sessionmaker() as db:
            rows = (
                await db.execute(text("SELECT count(*) FROM outbox WHERE kind = 'rule'"))
            ).scalar_one()
        return {
            "rules": len(ids) if rules else 0,
            "wandb_requests": len(wandb.calls),
            "passes": passes,
            "rule_rows": rows,
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "in_rules_s": round(timed.seconds, 3),
        }
    finally:
        await rt.aclose()


def run(backend: str, sessions: int) -> dict[str, Any]:
    out: dict[str, Any] = {"backend": backend, "sessions": sessions}
    for rules in (False, True):
        with database(backend) as db, FakeTogether() as together, FakeWandb() as wandb:
            ids = seed(
                db.url,
                together,
                sessions=sessions,
                channels_per_session=1,
                channel_of=lambda i, j: f"CR{i // PER_CHANNEL:03d}",
            )
            wandb.add_run("example-org", "grpo-gsm8k", ids[0][:8], FakeRun(rows=_rows()))
            out["with_rules" if rules else "without_rules"] = asyncio.run(
                _passes(db.url, wandb, rules=rules, ids=ids)
            )
    base, ruled = out["without_rules"], out["with_rules"]
    out["extra_requests"] = ruled["wandb_requests"] - base["wandb_requests"]
    out["extra_cpu_s"] = round(ruled["cpu_s"] - base["cpu_s"], 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="sqlite")
    parser.add_argument("--sessions", type=int, default=300)
    args = parser.parse_args()
    print(json.dumps(run(args.backend, args.sessions), indent=2))


if __name__ == "__main__":
    main()
