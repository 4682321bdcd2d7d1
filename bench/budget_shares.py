"""The request budget's shares at a team's sizes, computed with the bot's own rules
(`bot.together.shares`, the poll plan's costs and the poller's interval): what
each tier keeps, and the poll interval a round of N watched sessions gets, with
every watch on, alone and with people asking beyond their floor, with every
tier below the poll asking, and with follow discovery and the idle and spend
watches quiet (no rule, nothing idle: their floors are the poll's).

    python -m bench.budget_shares [--budget 120] [--sessions 150,1000]

A model calculation, not a measurement: what the shares promise when every
other tier that asks spends its floor (the worst case for the poll)."""

from __future__ import annotations

import argparse

from bot.poll.pace import GATE_HEADROOM
from bot.settings.model import Settings
from bot.together.gate import GRANT_SECONDS, SLICES
from bot.together.poll_plan import Plan, budget_interval, round_cost
from bot.together.shares import Shares, Tier, running_tiers


def table(budget: float, sessions: list[int], people_per_minute: float) -> list[str]:
    settings = Settings(
        _env_file=None,
        together_requests_per_minute=budget,
        watch_all_errors=True,
        watch_idle_resources=True,
        oncall_channel="COPS",
    )
    slice_seconds = 60.0 / SLICES
    books = slice_seconds + GRANT_SECONDS
    shares = Shares.of(budget * slice_seconds / 60.0, running_tiers(settings))
    per_minute = 60.0 / books
    lines = [
        f"budget {budget:.0f}/min, every watch on; a slice of {slice_seconds:.0f} s "
        f"(+{GRANT_SECONDS} s) holds {shares.budget}",
        "floors a minute: "
        + ", ".join(f"{t.value} {shares.floor(t) * per_minute:.1f}" for t in Tier)
        + f"; free {shares.free * per_minute:.1f}",
    ]
    people = {Tier.PEOPLE: round(people_per_minute / per_minute)}
    asking = {Tier.ERRORS: 0, Tier.FOLLOW: 0, Tier.IDLE: 0}
    for label, spent in (
        ("every tier asking, at its floor", asking),
        (f"people {people_per_minute:.0f}/min", {**asking, **people}),
        ("follow and idle/spend quiet", {Tier.ERRORS: 0}),
        (f"quiet, people {people_per_minute:.0f}/min", {Tier.ERRORS: 0, **people}),
    ):
        room = shares.poll_capacity(spent) * per_minute * GATE_HEADROOM
        lines.append(f"  {label}: the poll plans on {room:.1f}/min")
        for n in sessions:
            for plan in (Plan.LIST, Plan.GET):
                cost = round_cost(n, None, plan)
                interval = budget_interval(
                    cost,
                    requests_per_minute=room,
                    min_seconds=settings.poll_min_interval_seconds,
                    max_seconds=settings.poll_interval_seconds,
                )
                needs = cost * 60.0 / room
                lines.append(
                    f"    {n:5d} watched, {plan.value:4s}: {cost:5d} requests a round, every "
                    f"{interval:5.1f} s"
                    + (
                        f" (a round takes {needs:.0f} s of share: cycles wait)"
                        if needs > interval
                        else ""
                    )
                )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=float, default=120.0)
    parser.add_argument("--sessions", default="150,1000")
    parser.add_argument("--people", type=float, default=60.0)
    args = parser.parse_args()
    sessions = [int(s) for s in args.sessions.split(",")]
    print("\n".join(table(args.budget, sessions, args.people)))


if __name__ == "__main__":
    main()
