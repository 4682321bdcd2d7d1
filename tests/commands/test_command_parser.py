"""The `/rl-session` grammar as a pure rule: text in, `Command` out, no process.

The property tests in tests/commands/test_properties.py hold the parser to safety
(nothing but a well-formed id ever leaves it); these pin each form's meaning:
verbs, filters, mute durations and digest times.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.commands.parser import (
    MAX_MUTE,
    Command,
    Problem,
    parse,
    parse_duration,
)
from bot.subscriptions.options import DEFAULT_FILTERS, ThreadOptions

SID = "123e4567-e89b-12d3-a456-426614174000"


def problem_text(command: Command) -> str:
    """The words a usage problem is answered with (empty when there is none)."""
    assert command.problem is Problem.USAGE, command
    return command.reason


# --- verbs -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [None, "", "   ", "help", "HELP", "-h", "--help", "?"])
def test_empty_text_and_help_aliases_are_help(text: str | None) -> None:
    assert parse(text) == Command("help")


def test_a_bare_id_shows_the_card() -> None:
    assert parse(SID) == Command("show", session_id=SID)
    assert parse(f"  {SID}\n") == Command("show", session_id=SID)


@pytest.mark.parametrize("verb", ["show", "unsubscribe", "unmute"])
def test_one_id_verbs(verb: str) -> None:
    assert parse(f"{verb} {SID}") == Command(verb, session_id=SID)  # type: ignore[arg-type]
    assert parse(f"{verb.upper()} {SID}").session_id == SID


@pytest.mark.parametrize("verb", ["show", "unsubscribe", "unmute"])
@pytest.mark.parametrize("args", ["", f"{SID} {SID}", f"{SID} extra"])
def test_one_id_verbs_want_exactly_one_id(verb: str, args: str) -> None:
    command = parse(f"{verb} {args}")
    assert command.verb == verb and command.session_id is None
    assert "exactly one session id" in problem_text(command)


def test_list_takes_no_arguments() -> None:
    assert parse("list") == Command("list")
    assert parse("LIST") == Command("list")
    command = parse("list everything")
    assert command.verb == "list" and command.problem is not None
    assert "takes no arguments" in problem_text(command)


def test_unknown_words_are_answered_with_usage_not_sent_anywhere() -> None:
    command = parse("frobnicate the session")
    assert command.verb == "help" and command.session_id is None
    assert "did not understand" in problem_text(command)


@pytest.mark.parametrize("text", ["<!channel>", "<@U0123|ana>", "subscribe <https://x.example>"])
def test_a_slack_token_is_no_session_id_or_name(text: str) -> None:
    command = parse(text)
    assert command.session_id is None
    # An id problem is not a usage problem: it is answered without the usage text.
    assert command.problem is Problem.INVALID_ID


@pytest.mark.parametrize(
    ("text", "verb", "word"),
    [
        ("grpo-gsm8k-main", "show", "grpo-gsm8k-main"),
        ("../etc/passwd", "show", "../etc/passwd"),
        (f"show {SID}/x", "show", f"{SID}/x"),
        ("subscribe my.run status", "subscribe", "my.run"),
        ("chart Qwen/run:7 reward", "chart", "Qwen/run:7"),
        ("mute a&amp;b 2h", "mute", "a&amp;b"),
        ("alert grpo-main reward < 0.2", "alert", "grpo-main"),
        ("budget grpo-main $20", "budget", "grpo-main"),
        ("alerts grpo-main", "alerts", "grpo-main"),
    ],
)
def test_a_display_name_stands_where_an_id_does(text: str, verb: str, word: str) -> None:
    """Resolved later (`bot.commands.names`); a name never goes into a URL."""
    command = parse(text)
    assert command.problem is None and command.verb == verb
    assert command.target == word


def test_every_and_no_session_are_no_target() -> None:
    assert parse("alert * reward < 1").target is None
    assert parse("budget * $5/day").target is None
    assert parse("alerts").target is None
    assert parse("ls all").target is None


def test_naming_puts_the_id_where_the_name_was() -> None:
    for text in (
        "grpo",
        "subscribe grpo",
        "alert grpo reward < 1",
        "budget grpo $5",
        "alerts grpo",
    ):
        command = parse(text)
        named = command.naming(SID)
        assert named.target == SID and named.verb == command.verb, text


def test_stop_points_to_the_cards_button() -> None:
    command = parse(f"stop {SID}")
    assert command.problem is Problem.USAGE
    words = problem_text(command)
    assert "Stop session" in words and "card" in words and "did not understand" not in words


# --- subscribe and its filters ------------------------------------------------------------


def test_subscribe_defaults_to_status_changes() -> None:
    command = parse(f"subscribe {SID}")
    assert command == Command(
        "subscribe", session_id=SID, options=ThreadOptions(filters=DEFAULT_FILTERS)
    )
    assert command.options.filters == frozenset({"status"})


@pytest.mark.parametrize(
    ("words", "filters"),
    [
        ("checkpoints", {"checkpoints"}),
        ("errors-only", {"errors-only"}),
        ("status checkpoints", {"status", "checkpoints"}),
        ("ERRORS-ONLY Checkpoints", {"errors-only", "checkpoints"}),
        ("status status", {"status"}),
    ],
)
def test_subscribe_filters(words: str, filters: set[str]) -> None:
    command = parse(f"subscribe {SID} {words}")
    assert command.problem is None
    assert command.options.filters == frozenset(filters)


def test_subscribe_refuses_unknown_filters_and_names_the_known_ones() -> None:
    command = parse(f"subscribe {SID} everything")
    assert command.session_id is None
    for name in ("`status`", "`checkpoints`", "`errors-only`"):
        assert name in problem_text(command)


def test_status_and_errors_only_are_exclusive() -> None:
    command = parse(f"subscribe {SID} status errors-only")
    assert command.session_id is None
    assert "not both" in problem_text(command)


def test_subscribe_needs_an_id() -> None:
    command = parse("subscribe")
    assert command.verb == "subscribe" and command.session_id is None
    assert "needs a session id" in problem_text(command)


def test_subscribe_with_a_bad_id_is_an_id_problem() -> None:
    assert parse("subscribe ../x status").problem == parse("../x").problem


# --- mute durations ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1m", timedelta(minutes=1)),
        ("30m", timedelta(minutes=30)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1d2h3m", timedelta(days=1, hours=2, minutes=3)),
        (" 2H ", timedelta(hours=2)),
        ("90m", timedelta(minutes=90)),
        ("30d", MAX_MUTE),
        ("720h", MAX_MUTE),
    ],
)
def test_durations_accepted(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0m",
        "0d0h0m",
        "30d1m",
        "31d",
        "721h",
        "forever",
        "2",
        "m",
        "h30m1d",
        "1.5h",
        "-1h",
        "2 h",
        "1w",
        "99999d",
    ],
)
def test_durations_refused(text: str) -> None:
    assert parse_duration(text) is None


def test_mute_command() -> None:
    assert parse(f"mute {SID} 2h") == Command("mute", session_id=SID, duration=timedelta(hours=2))
    assert parse(f"unmute {SID}") == Command("unmute", session_id=SID)


@pytest.mark.parametrize("args", ["", SID, f"{SID} 2h extra"])
def test_mute_wants_an_id_and_a_duration(args: str) -> None:
    command = parse(f"mute {args}")
    assert command.session_id is None
    assert "a session id or name and a duration" in problem_text(command)


def test_a_refused_duration_is_echoed_inert_and_short() -> None:
    command = parse(f"mute {SID} <!here>`&" + "x" * 200)
    words = problem_text(command)
    assert command.session_id is None and command.duration is None
    assert "is not a duration I accept" in words
    echoed = words.split(" is not a duration")[0]
    assert echoed.startswith("`") and echoed.endswith("`")
    inside = echoed[1:-1]
    assert "<" not in inside and ">" not in inside and "`" not in inside
    assert "&lt;!here&gt;" in inside
    assert len(inside) <= 45 and inside.endswith("…")


def test_mute_with_a_bad_id_and_a_good_duration_is_an_id_problem() -> None:
    assert parse("mute ../x 2h").problem == parse("../x").problem


# --- digest times ---------------------------------------------------------------------------


def test_digest_off() -> None:
    assert parse("digest off") == Command("digest", digest_time=None)


@pytest.mark.parametrize(
    ("text", "time", "zone"),
    [
        ("digest on 09:00", "09:00", None),
        ("digest on 9:05", "09:05", None),
        ("digest ON 23:59", "23:59", None),
        ("digest on 00:00 UTC", "00:00", "UTC"),
        ("digest on 18:30 Europe/Berlin", "18:30", "Europe/Berlin"),
        (
            "digest on 7:00 America/Argentina/Buenos_Aires",
            "07:00",
            "America/Argentina/Buenos_Aires",
        ),
    ],
)
def test_digest_on(text: str, time: str, zone: str | None) -> None:
    command = parse(text)
    assert command == Command("digest", digest_time=time, timezone=zone)


@pytest.mark.parametrize(
    "time", ["24:00", "9", "09:60", "9:5", "0900", "09:00:00", "-1:00", "ab:cd"]
)
def test_digest_refuses_what_is_not_a_time_of_day(time: str) -> None:
    command = parse(f"digest on {time}")
    assert command.problem is not None and command.digest_time is None
    assert "is not a time of day" in problem_text(command)


@pytest.mark.parametrize(
    "zone", ["Mars/Olympus", "America", "x" * 300, "../../etc/passwd", "<!channel>"]
)
def test_digest_refuses_unknown_zones(zone: str) -> None:
    command = parse(f"digest on 09:00 {zone}")
    words = problem_text(command)
    assert command.problem is not None and command.timezone is None
    assert "is not a time zone I know" in words
    assert "<" not in words.split(" is not a time zone")[0]


@pytest.mark.parametrize(
    "text", ["digest", "digest on", "digest at 09:00", "digest on 09:00 UTC x"]
)
def test_digest_usage(text: str) -> None:
    command = parse(text)
    assert command.verb == "digest" and command.problem is not None
    assert "digest on HH:MM" in problem_text(command)


def test_ls_takes_its_query_from_session_list() -> None:
    from bot.commands.ls_query import ListQuery

    command = parse("ls error <@U0ANA|ana> model=Qwen/Qwen3.5-4B")
    assert command.verb == "ls" and command.problem is None
    assert command.listing == ListQuery("error", "U0ANA", "Qwen/Qwen3.5-4B")
    assert parse("ls").listing == ListQuery("running")
    refused = parse("ls stopped")
    assert refused.verb == "ls" and refused.problem is Problem.USAGE
    assert "ls [running|creating|error|all]" in refused.reason


@pytest.mark.parametrize(
    ("text", "step"),
    [("target=2000", 2000), ("TARGET=2,000", 2000), ("target=1_000_000", 10**6), ("target=1", 1)],
)
def test_subscribe_target_is_a_whole_step(text: str, step: int) -> None:
    command = parse(f"subscribe {SID} checkpoints {text}")
    assert command.problem is None
    assert command.options.target_step == step
    assert command.options.filters == frozenset({"checkpoints"})


def test_subscribe_without_target_keeps_the_threads() -> None:
    assert parse(f"subscribe {SID} stall=30m").options.target_step is None


@pytest.mark.parametrize(
    "text",
    [
        "target=",
        "target=0",
        "target=-5",
        "target=2k",
        "target=1.5",
        "target=１２",
        "target=1000000000001",
        "target=10 target=20",
    ],
)
def test_bad_targets_are_refused_with_the_usage(text: str) -> None:
    command = parse(f"subscribe {SID} {text}")
    assert command.problem is Problem.USAGE and "target=" in command.reason


# --- follow / unfollow --------------------------------------------------------------------


def test_follow_takes_a_selector_model_filters_stall_and_existing() -> None:
    command = parse(
        "follow <@U456|bob> model=Qwen/Qwen3.5-4B checkpoints errors-only stall=2h existing"
    )
    assert command.verb == "follow" and command.problem is None
    rule = command.rule
    assert rule is not None
    assert (rule.who, rule.model, rule.options.stall_after_minutes, rule.existing) == (
        "U456",
        "Qwen/Qwen3.5-4B",
        120,
        True,
    )
    assert rule.options.filters == frozenset({"checkpoints", "errors-only"})
    assert rule.selector("U123") == "U456"
    mine = parse("follow MINE").rule
    assert mine is not None and mine.selector("U123") == "U123"
    assert mine.options.filters == DEFAULT_FILTERS and mine.existing is False
    everyone = parse("unfollow all model=m1").rule
    assert everyone is not None and (everyone.who, everyone.model) == ("all", "m1")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("follow", "needs `mine`, `@user` or `all`"),
        ("follow bob", "needs `mine`, `@user` or `all` first"),
        ("follow @bob", "pick the person"),
        ("follow all model=" + "m" * 201, "at most 200 characters"),
        ("follow all model=a model=b", "one `model=&lt;name&gt;`"),
        ("follow all status errors-only", "not both"),
        ("follow all stall=forever", "stall="),
        ("follow all sometimes", "Unknown word"),
        ("unfollow all errors-only", "selector and `model=` only"),
    ],
)
def test_bad_follow_rules_are_refused_in_words(text: str, says: str) -> None:
    assert says in problem_text(parse(text))
