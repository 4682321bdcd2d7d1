"""`/rl-session list` shows each thread's own options written as `subscribe`
takes them, so what is shown can be typed again; defaults are not shown."""

from __future__ import annotations

from bot.commands.parser import parse
from bot.commands.subscribe import thread_options
from bot.store.tables import Subscription


def _sub(**values: object) -> Subscription:
    return Subscription(team_id="T", channel_id="C", session_id="s", subscribed_by="U", **values)


def test_a_thread_at_the_defaults_shows_no_options() -> None:
    assert thread_options(_sub(chart_on_end=True)) == ()


def test_each_option_is_shown_as_subscribe_takes_it() -> None:
    sub = _sub(
        stall_after_minutes=90,
        target_step=2000,
        broadcast="all",
        dm="creator",
        chart_on_end=False,
    )
    options = thread_options(sub)
    assert options == ("stall=90m", "target=2000", "broadcast=all", "dm=creator", "chart=off")
    assert thread_options(_sub(stall_after_minutes=0, chart_on_end=True)) == ("stall=off",)

    # what is shown parses back to the same thread settings
    command = parse(f"subscribe {'a' * 8}-0000-4000-8000-000000000000 " + " ".join(options))
    assert command.problem is None and command.verb == "subscribe"
    assert command.stall_minutes == 90 and command.target_step == 2000
    assert command.broadcast == "all" and command.dm == "creator"
    assert command.chart_on_end is False
