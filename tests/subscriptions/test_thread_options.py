"""A thread's options (`ThreadOptions`): what a person may give, what is kept
when they give nothing, and how `list` writes a thread's options back (as
`subscribe` takes them, so what is shown can be typed again; defaults are not
shown)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from bot.commands.parser import parse
from bot.store.tables import Subscription
from bot.subscriptions.options import DEFAULT_FILTERS, MAX_STALL_MINUTES, ThreadOptions

SID = f"{'a' * 8}-0000-4000-8000-000000000000"


def _sub(**values: object) -> Subscription:
    return Subscription(
        team_id="T", channel_id="C", session_id="s", subscribed_by="U", filters="status", **values
    )


def test_a_thread_at_the_defaults_shows_no_options() -> None:
    assert ThreadOptions.of_thread(_sub(chart_on_end=True)).words() == ()


def test_each_option_is_shown_as_subscribe_takes_it() -> None:
    sub = _sub(
        stall_after_minutes=90,
        target_step=2000,
        broadcast="all",
        dm="creator",
        chart_on_end=False,
    )
    options = ThreadOptions.of_thread(sub).words()
    assert options == ("stall=90m", "target=2000", "broadcast=all", "dm=creator", "chart=off")
    stall_off = _sub(stall_after_minutes=0, chart_on_end=True)
    assert ThreadOptions.of_thread(stall_off).words() == ("stall=off",)

    # what is shown parses back to the same thread settings
    command = parse(f"subscribe {SID} " + " ".join(options))
    assert command.problem is None and command.verb == "subscribe"
    assert command.options.words() == options
    assert command.options.stall_after_minutes == 90 and command.options.target_step == 2000


def test_nothing_given_keeps_the_filters_and_sets_nothing_of_the_thread() -> None:
    """A button gives nothing: the channel keeps its filters (a new thread gets
    the default) and no option is written; filters alone are not a thread option."""
    kept = ThreadOptions()
    assert kept.filters is None and kept.chosen_filters == DEFAULT_FILTERS
    assert not kept.sets_thread
    assert not ThreadOptions(filters=frozenset({"checkpoints"})).sets_thread
    assert ThreadOptions(filters=frozenset({"checkpoints"})).chosen_filters == {"checkpoints"}
    for given in (
        {"stall_after_minutes": 0},
        {"target_step": 1},
        {"broadcast": "off"},
        {"dm": ""},
        {"chart_on_end": True},
    ):
        assert ThreadOptions.model_validate(given).sets_thread, given


@pytest.mark.parametrize(
    "values",
    [
        {"filters": frozenset({"everything"})},
        {"filters": frozenset({"status", "errors-only"})},
        {"stall_after_minutes": -1},
        {"stall_after_minutes": MAX_STALL_MINUTES + 1},
        {"stall_after_minutes": "30"},  # never read from text unchecked
        {"target_step": 0},
        {"broadcast": "sometimes"},
        {"dm": "everyone"},
        {"colour": "red"},
    ],
)
def test_options_outside_what_subscribe_takes_are_refused(values: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ThreadOptions.model_validate(values)


def test_the_longest_stall_a_command_takes_is_an_option() -> None:
    command = parse(f"subscribe {SID} stall=30d")
    assert command.options.stall_after_minutes == MAX_STALL_MINUTES
    assert parse(f"subscribe {SID} stall=30d1m").problem is not None
