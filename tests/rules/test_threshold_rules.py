"""Metric rules and budgets judged without I/O: the crossing state machine, the
budget levels and forecast, the daily count's day boundary, and the grammar of
`alert`, `alerts` and `budget`."""

from __future__ import annotations

import math
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.alerts.metric_rules import Reading, poll_readings
from bot.commands.parser import Problem, parse
from bot.commands.rule_query import BudgetSpec, RuleSpec
from bot.jobs.metric_reads import rule_readings
from bot.rendering.rules import budget_alert, forecast_words
from bot.training.poll_progress import PollProgress
from bot.training.thresholds import (
    OPS,
    DailySpend,
    RuleState,
    budget_level,
    crossing_began,
    daily_spend,
    day_start,
    judge_reading,
    local_day,
    reaches_at,
)
from bot.wandb.history import Series

T = datetime(2026, 12, 3, 12, 0)
SID = "sess-0123456789abcdef"


def _run(values: list[float | None], *, hold: float = 0.0, gap: float = 60.0) -> list[int]:
    """The indexes of the readings at which `reward < 0.2` fires."""
    state, fired = RuleState(), []
    for i, value in enumerate(values):
        state, fire = judge_reading(
            state,
            op="<",
            threshold=0.2,
            value=value,
            now=T + timedelta(seconds=gap * i),
            hold=timedelta(seconds=hold),
        )
        if fire is not None:
            fired.append(i)
    return fired


def test_a_rule_fires_once_per_crossing_and_rearms_after_one_good_reading() -> None:
    assert _run([0.5, 0.1, 0.1, 0.05, 0.3, 0.1]) == [1, 5]


def test_for_waits_until_the_crossing_has_held_that_long() -> None:
    # 60 s between readings, 150 s to hold: fires on the fourth bad reading
    assert _run([0.1, 0.1, 0.1, 0.1, 0.1], hold=150) == [3]
    # a good reading in between starts the clock again
    assert _run([0.1, 0.1, 0.5, 0.1, 0.1, 0.1, 0.1], hold=150) == [6]


def test_a_crossing_is_timed_from_when_it_began_when_the_reading_knows() -> None:
    # read every 35 s; the fall was logged 30 s before the read that first saw it
    state, fire = judge_reading(
        RuleState(),
        op="<",
        threshold=0.2,
        value=0.1,
        now=T,
        hold=timedelta(seconds=60),
        began=T - timedelta(seconds=30),
    )
    assert fire is None and state.since == T - timedelta(seconds=30)
    state, fire = judge_reading(
        state,
        op="<",
        threshold=0.2,
        value=0.1,
        now=T + timedelta(seconds=35),
        hold=timedelta(seconds=60),
    )
    assert fire is not None and fire.held == timedelta(seconds=65)  # the next read, not two
    # a known crossing keeps its start; a start after now is now
    again, _ = judge_reading(
        state,
        op="<",
        threshold=0.2,
        value=0.1,
        now=T + timedelta(seconds=70),
        hold=timedelta(seconds=60),
        began=T,
    )
    assert again.since == T - timedelta(seconds=30)
    future, _ = judge_reading(
        RuleState(),
        op="<",
        threshold=0.2,
        value=0.1,
        now=T,
        hold=timedelta(0),
        began=T + timedelta(hours=1),
    )
    assert future.since == T


def test_where_a_crossing_began_among_logged_points() -> None:
    points = [(1.0, 0.5), (2.0, 0.1), (3.0, 0.3), (4.0, 0.15), (5.0, math.nan), (6.0, 0.1)]
    assert crossing_began(points, op="<", threshold=0.2) == 4.0
    assert crossing_began(points[:3], op="<", threshold=0.2) is None
    assert crossing_began([(1.0, 0.1), (2.0, 0.1)], op="<", threshold=0.2) == 1.0
    assert crossing_began([], op="<", threshold=0.2) is None


def test_a_reading_times_its_crossing_between_the_last_read_and_now() -> None:
    logged = (T - datetime(1970, 1, 1)).total_seconds()
    points = ((logged - 100, 0.5), (logged - 40, 0.1), (logged, 0.1))
    floor = T - timedelta(seconds=35)
    reading = Reading(0.1, 3.0, points=points, floor=floor)
    # logged 40 s ago, but the read 35 s ago saw no crossing: no earlier than that
    assert reading.began(op="<", threshold=0.2, now=T) == floor
    late = Reading(0.1, 3.0, points=points, floor=T - timedelta(minutes=5))
    assert late.began(op="<", threshold=0.2, now=T) == T - timedelta(seconds=40)
    # a clock ahead of ours is now; no earlier read, or no times: now
    assert late.began(op="<", threshold=0.2, now=T - timedelta(minutes=1)) is not None
    assert Reading(0.1, 3.0, points=points).began(op="<", threshold=0.2, now=T) is None
    assert Reading(0.1, 3.0, floor=floor).began(op="<", threshold=0.2, now=T) is None
    series = Series("reward", (1.0, 2.0, 3.0), (0.5, 0.1, 0.1), times=tuple(p[0] for p in points))
    found = rule_readings({"reward"}, {"reward": 0.1}, {"reward": series}, floor=floor)
    assert found["reward"].points == points and found["reward"].floor == floor


def test_missing_nan_and_infinite_readings_neither_fire_nor_rearm() -> None:
    assert _run([None, math.nan, -math.inf]) == []
    assert _run([0.1, math.nan, None, 0.1, 0.5, 0.1]) == [0, 5]


def test_the_fire_says_how_long_the_crossing_held() -> None:
    state, fire = judge_reading(
        RuleState(since=T),
        op=">=",
        threshold=1,
        value=1,
        now=T + timedelta(minutes=10),
        hold=timedelta(minutes=5),
    )
    assert fire is not None and fire.since == T and fire.held == timedelta(minutes=10)
    assert state == RuleState(since=T, fired=True)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.floats(-1, 1)), max_size=30),
    op=st.sampled_from(OPS),
)
def test_never_two_fires_without_a_good_reading_between(
    values: list[float | None], op: str
) -> None:
    state, last_fire, good_since = RuleState(), None, False
    for i, value in enumerate(values):
        state, fire = judge_reading(
            state,
            op=op,
            threshold=0.0,
            value=value,
            now=T + timedelta(minutes=i),  # type: ignore[arg-type]
            hold=timedelta(0),
        )
        broke = value is not None and math.isfinite(value) and _breaks(op, value)
        if value is not None and math.isfinite(value) and not broke:
            good_since = True
        if fire is not None:
            assert broke
            assert last_fire is None or good_since
            last_fire, good_since = i, False
        elif broke:
            assert last_fire is not None and not good_since  # a break is told at once


def _breaks(op: str, value: float) -> bool:
    return {"<": value < 0, "<=": value <= 0, ">": value > 0, ">=": value >= 0}[op]


def test_budget_levels_and_forecast() -> None:
    assert [budget_level(s, 200) for s in (0, 159.9, 160, 199.99, 200, 500)] == [
        0,
        0,
        80,
        80,
        100,
        100,
    ]
    at = reaches_at(163, 200, 12.5, T)
    assert at == T + timedelta(hours=37 / 12.5)
    assert reaches_at(200, 200, 12.5, T) is None and reaches_at(10, 200, 0.0, T) is None
    words = forecast_words(
        163, 200, per_hour=12.5, reaches_at=datetime(2026, 12, 3, 14, 30), currency="USD", now=T
    )
    assert words == "$163 of $200; at $12.50/h it reaches $200 at 14:30 UTC"


def test_the_forecast_names_the_date_when_it_is_not_today() -> None:
    def when(reaches: datetime, now: datetime = T) -> str:
        words = forecast_words(10, 200, per_hour=1.0, reaches_at=reaches, currency="USD", now=now)
        return words.split("it reaches $200 ", 1)[1]

    assert when(datetime(2026, 12, 3, 23, 59)) == "at 23:59 UTC"
    assert when(datetime(2026, 12, 4, 0, 1)) == "tomorrow, 4 Dec, at 00:01 UTC"
    assert when(datetime(2026, 12, 6, 4, 0)) == "on 6 Dec at 04:00 UTC"
    assert when(datetime(2027, 5, 3, 4, 0)) == "on 3 May 2027 at 04:00 UTC"
    # the day is UTC's, as the time is; an aware time is read in UTC
    aware = datetime(2026, 12, 4, 0, 30, tzinfo=ZoneInfo("Europe/Berlin"))
    assert when(aware) == "at 23:30 UTC"
    message = budget_alert(
        "grpo-1",
        level=80,
        spent=160.0,
        amount=200.0,
        per_hour=1.0,
        reaches_at=datetime(2027, 5, 3, 4, 0),
        currency="USD",
        now=T,
    )
    assert "reaches $200 on 3 May 2027 at 04:00 UTC" in message["text"].replace("\u2060", "")


def test_the_daily_count_starts_at_local_midnight_not_utc() -> None:
    zone = "America/Los_Angeles"  # UTC-8 in December
    before = datetime(2026, 12, 4, 7, 59)  # 23:59 on the 3rd, local
    after = datetime(2026, 12, 4, 8, 1)  # 00:01 on the 4th, local
    assert local_day(before, zone) == date(2026, 12, 3)
    assert local_day(after, zone) == date(2026, 12, 4)
    assert day_start(date(2026, 12, 4), zone) == datetime(2026, 12, 4, 8, 0)
    count = daily_spend(None, {"a": 10.0}, now=before, zone=zone)
    count = daily_spend(count, {"a": 50.0, "b": 5.0}, now=before, zone=zone)
    assert count.spent() == 40.0  # b counts from when it was first seen
    count = daily_spend(count, {"a": 60.0, "b": 7.0}, now=before, zone=zone)
    assert count.spent() == 52.0
    next_day = daily_spend(count, {"a": 60.0, "b": 7.0}, now=after, zone=zone)
    assert next_day.day == date(2026, 12, 4) and next_day.spent() == 0.0
    later = daily_spend(next_day, {"a": 61.5}, now=after, zone=zone)
    assert later.spent() == 1.5


def test_a_daily_count_keeps_what_a_session_that_ended_spent_today() -> None:
    zone, now = "UTC", datetime(2026, 12, 4, 12, 0)
    count = daily_spend(None, {"a": 0.0, "b": 0.0}, now=now, zone=zone)
    count = daily_spend(count, {"a": 60.0, "b": 5.0}, now=now, zone=zone)
    # a ended: its spend is no longer read, and what it spent today still counts
    count = daily_spend(count, {"b": 50.0}, now=now, zone=zone)
    assert count.spent() == 110.0
    assert budget_level(count.spent(), 100.0) == 100
    # as stored and read back, then a new day forgets it
    again = DailySpend.of_stored(count.day, count.stored())
    assert again == count and again.spent() == 110.0
    tomorrow = daily_spend(again, {"b": 55.0}, now=now + timedelta(days=1), zone=zone)
    assert tomorrow.spent() == 0.0 and set(tomorrow.baseline) == {"b"}


def test_a_stored_daily_count_is_read_tolerantly() -> None:
    day = date(2026, 12, 4)
    # a bare number (the earlier shape) is a baseline not yet seen again today
    assert DailySpend.of_stored(day, {"a": 60.0}).spent() == 0.0
    odd = DailySpend.of_stored(day, {"a": [1.0, 3.0], "b": "x", "c": [1.0], "d": [True, 2.0]})
    assert odd.spent() == 2.0 and set(odd.baseline) == {"a"}
    assert DailySpend.of_stored(day, {"a": [0.0, math.inf]}).spent() == 0.0


def test_readings_come_from_the_poll_and_the_w_and_b_read() -> None:
    # the progress column as the poll hands it over (its model)
    progress = PollProgress(step=120, since=T, running=True, rate=12.0, anchored=True, seen_at=T)
    readings = poll_readings({"s1": {"progress": progress}, "s2": {"next_poll_at": T}})
    assert list(readings) == ["s1"] and readings["s1"]["steps_per_min"].value == 12.0
    series = Series("reward", (10.0, 20.0), (0.3, 0.1))
    found = rule_readings({"reward", "kl", "steps_per_min"}, {"reward": 0.1}, {"reward": series})
    assert found["reward"].value == 0.1 and found["reward"].step == 20.0
    assert found["kl"].value is None and "steps_per_min" not in found


def test_the_alert_grammar() -> None:
    command = parse(f"alert {SID} reward &lt; 0.2 for 10m page")
    assert command.metric_rule == RuleSpec(SID, "reward", "<", 0.2, timedelta(minutes=10), True)
    assert parse("alert * steps_per_min <= 5").metric_rule == RuleSpec(
        "*", "steps_per_min", "<=", 5.0
    )
    assert parse(f"alert {SID} off").metric_rule == RuleSpec(SID, None)
    assert parse("alert * off kl").metric_rule == RuleSpec("*", "kl")
    assert parse("alerts").verb == "alerts" and parse("alerts").rules_of is None
    assert parse(f"alerts {SID}").rules_of == SID


def test_bad_rules_get_a_clear_answer() -> None:
    cases = {
        f"alert {SID} reward = 0.2": "is not an operator",
        f"alert {SID} reward < nan": "is not a finite number",
        f"alert {SID} reward < inf": "is not a finite number",
        f"alert {SID} reward < 1e999": "is not a finite number",
        f"alert {SID} {'m' * 65} < 1": "at most 64 characters",
        f"alert {SID} reward < 1 for 31d": "at most 30 days",
        f"alert {SID} reward < 1 for soon": "is not a duration",
        f"alert {SID} reward < 1 loudly": "did not understand",
        "alert <@U0123> reward < 1": "is not a session id, a name or `*`",
    }
    for text, words in cases.items():
        command = parse(text)
        assert command.problem is Problem.USAGE and words in command.reason, text


def test_the_budget_grammar() -> None:
    assert parse(f"budget {SID} $200").budget == BudgetSpec(SID, 200.0)
    assert parse("budget * $1,500.50/day").budget == BudgetSpec("*", 1500.5, daily=True)
    assert parse(f"budget {SID} off").budget == BudgetSpec(SID, None)
    for text in (
        f"budget {SID} $0",
        f"budget {SID} $-5",
        f"budget {SID} $nan",
        f"budget {SID} $inf",
        f"budget {SID} $1000001",
        f"budget {SID} $5/day",
        "budget * $5",
    ):
        assert parse(text).problem is Problem.USAGE, text
