"""Setting names belong to the operator, not the channel: nothing the bot says to
people names one (`STALL_AFTER_MINUTES`, `CREATED_BY_USER_MAP`, ...). Where a
person needs the operator, the words say what to ask for."""

from __future__ import annotations

import importlib
import pkgutil
import re
from typing import Any, get_args

import pytest

import bot.commands
import bot.rendering
import bot.subscriptions
from bot.rendering import help_message
from bot.rendering.follow import home_blocks
from bot.rendering.refusals import (
    AllowlistRefusal,
    Guarded,
    allowlist_refusal,
    unlisted_creator,
    unmapped_answer,
)
from bot.rendering.thread_options import routing_words
from bot.settings.model import Settings

SETTING = re.compile(
    r"\b("
    + "|".join(sorted((f.upper() for f in Settings.model_fields), key=len, reverse=True))
    + r")\b"
)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple, frozenset, set)):
        return [s for v in value for s in _strings(v)]
    return []


def _said_constants() -> list[tuple[str, str]]:
    """Every string the modules that word answers hold at their top level: the
    rendering, the commands' grammar and refusals, Together's errors as told."""
    found = []
    names = [
        info.name
        for package in (bot.rendering, bot.commands, bot.subscriptions)
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")
    ]
    for module_name in [*names, "bot.together.errors", "bot.wandb.errors", "bot.charts.upload"]:
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if not name.startswith("__"):
                found += [(f"{module.__name__}.{name}", s) for s in _strings(value)]
    return found


def test_no_word_the_bot_says_names_a_setting() -> None:
    named = [(where, s) for where, s in _said_constants() if SETTING.search(s)]
    assert not named, named


def test_help_app_home_and_refusals_say_what_to_ask_the_operator_for() -> None:
    said = [
        str(help_message()),
        str(home_blocks([], switch_on=False, mapped=False)),
        unlisted_creator("U1", mine=True),
        unmapped_answer("U2", caller="U1"),
        *(
            allowlist_refusal(refusal, guarded)
            for refusal in AllowlistRefusal
            for guarded in get_args(Guarded)
        ),
    ]
    for text in said:
        assert not SETTING.search(text), text
    assert "the time your operator set" in said[0]
    assert "ask your operator to pair your Together user id" in said[1]
    assert "Stop allowlist" in allowlist_refusal(AllowlistRefusal.NOT_CONFIGURED, "stop")


@pytest.mark.parametrize("creator_slack_user", [None, "U9"])
def test_a_thread_that_dms_an_unknown_creator_says_what_the_operator_adds(
    creator_slack_user: str | None,
) -> None:
    words = routing_words(
        broadcast=None, dm="creator", creator="user_123", creator_slack_user=creator_slack_user
    )
    assert not SETTING.search(words), words
