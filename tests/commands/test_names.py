"""Names are ids, the pure parts: the command a match's button runs, and the
answers to a name several sessions share or none has."""

from __future__ import annotations

import json

import pytest

from bot.commands.names import with_id
from bot.commands.parser import parse
from bot.rendering.named import MAX_MATCHES, PICKED, no_session_named, sessions_named
from bot.training.sessions import TrainingSession
from tests.block_kit import block_kit_problems

SID = "123e4567-e89b-12d3-a456-426614174000"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("grpo-main", SID),
        ("show grpo-main", f"show {SID}"),
        ("subscribe  grpo-main   status stall=30m", f"subscribe {SID} status stall=30m"),
        ("chart grpo-main reward loss", f"chart {SID} reward loss"),
        ("mute grpo-main 2h", f"mute {SID} 2h"),
        ("unmute grpo-main", f"unmute {SID}"),
        ("unsubscribe grpo-main", f"unsubscribe {SID}"),
        (
            "alert grpo-main reward &lt; 0.2 for 10m page",
            f"alert {SID} reward &lt; 0.2 for 10m page",
        ),
        ("alerts grpo-main", f"alerts {SID}"),
        ("budget grpo-main $20", f"budget {SID} $20"),
        # a session named like a verb: the word in its place, not the verb
        ("subscribe subscribe", f"subscribe {SID}"),
        ("unmute unmute", f"unmute {SID}"),
    ],
)
def test_a_matchs_button_runs_the_same_command_with_its_id(text: str, expected: str) -> None:
    again = with_id(text, SID)
    assert again == expected
    before, after = parse(text), parse(again)
    assert after.verb == before.verb and after.target == SID
    assert after.naming("x") == before.naming("x")  # nothing else changed


@pytest.mark.parametrize("text", ["ls all", "alert * reward < 1", "help", "follow mine"])
def test_a_command_naming_no_one_session_has_no_button(text: str) -> None:
    assert with_id(text, SID) is None


def _session(number: int, name: str = "twin <!channel>") -> TrainingSession:
    return TrainingSession(
        id=f"{SID[:-2]}{number:02d}",
        display_name=name,
        status="TRAINING_SESSION_STATUS_RUNNING",
        created_at="2026-01-02T00:00:00Z",
    )


def test_several_matches_each_with_id_status_and_a_numbered_button() -> None:
    matches = [_session(n) for n in range(3)]
    commands = [f"show {s.id}" for s in matches[:2]] + [None]
    message = sessions_named("twin", matches, commands)
    assert block_kit_problems(message) == []
    dumped = json.dumps(message)
    assert "<!channel>" not in dumped  # a name is shown inert
    assert all(s.id in dumped for s in matches)
    buttons = [b["accessory"] for b in message["blocks"] if "accessory" in b]
    assert [b["value"] for b in buttons] == commands[:2]  # None: no button
    assert all(PICKED.fullmatch(b["action_id"]) for b in buttons)
    assert len({b["action_id"] for b in buttons}) == len(buttons)


def test_many_matches_are_counted_and_a_too_long_command_gets_no_button() -> None:
    matches = [_session(n) for n in range(MAX_MATCHES + 4)]
    commands = ["x" * 2001] + [f"show {s.id}" for s in matches[1:]]
    message = sessions_named("twin", matches, commands)
    assert block_kit_problems(message) == []
    assert "…and 4 more" in json.dumps(message, ensure_ascii=False)
    first = message["blocks"][1]
    assert "accessory" not in first


def test_no_match_points_to_ls_all_and_echoes_the_word_inert() -> None:
    message = no_session_named("<!here>`x")
    assert block_kit_problems(message) == []
    assert "`/rl-session ls all` lists them" in message["text"]
    assert "<!here>" not in json.dumps(message)
    assert "among the newest" in no_session_named("x", complete=False)["text"]


def test_the_word_is_escaped_in_the_fallback_too() -> None:
    """The word comes as typed (Slack's escapes undone): a name typed as
    `&lt;!channel&gt;` must not become a ping in the notification text."""
    message = sessions_named("<!channel>", [_session(1), _session(2)], [None, None])
    assert "<!channel>" not in json.dumps(message)
    assert "&lt;!channel&gt;" in message["text"]
