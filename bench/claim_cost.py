"""What one outbox claim costs with N waiting rows (`python -m bench.claim_cost
--backend postgresql --rows 150,1000,3000,10000`).

N pending routine redraws (`card`) in 3 channels, the table ANALYZEd, then
`claim_due` timed 5 times, each in a transaction rolled back (the claim takes
each channel's first row; nothing is sent). Delivery claims about once a second
and holds PostgreSQL's claim lock meanwhile, so this is what every replica's
sends wait behind. A standalone measurement, like `bench.redraw_pace`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from sqlalchemy import insert, text

from bench.env import database
from bot.outbox.queue import claim_due
from bot.outbox.table import OutboxMessage
from bot.store.engine import make_engine, make_sessionmaker


async def _measure(url: str, sizes: list[int], runs: int) -> dict[str, Any]:
    engine = make_engine(url)
    maker = make_sessionmaker(engine)
    out: dict[str, Any] = {}
    written = 0
    try:
        for n in sizes:
            async with maker() as db, db.begin():
                await db.execute(
                    insert(OutboxMessage.__table__),
                    [
                        {
                            "dedupe_key": f"bench:{i}",
                            "kind": "card",
                            "channel_id": f"C{i % 3}",
                            "thread_ts": "1700000000.000100",
                            "payload": {},
                            "state": "pending",
                            "attempts": 0,
                        }
                        for i in range(written, n)
                    ],
                )
                await db.execute(text("ANALYZE"))
            written = n
            times = []
            for _ in range(runs + 1):
                async with maker() as db, db.begin():
                    started = time.perf_counter()
                    rows = await claim_due(
                        db,
                        owner="bench",
                        limit=500,
                        lease_seconds=30,
                        channel_gap=1.0,
                        routine_per_minute=40,
                    )
                    times.append((time.perf_counter() - started) * 1000)
                    await db.rollback()
            out[str(n)] = {"claimed": len(rows), "ms": [round(t, 1) for t in times[1:]]}
    finally:
        await engine.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="postgresql", choices=["sqlite", "postgresql"])
    parser.add_argument("--rows", default="150,1000,3000,10000")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sizes = sorted(int(n) for n in args.rows.split(","))
    with database(args.backend) as db:
        result = asyncio.run(_measure(db.url, sizes, args.runs))
    print(json.dumps({"backend": args.backend, "claims": result}, indent=2))


if __name__ == "__main__":
    main()
