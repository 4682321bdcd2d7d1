"""The small rules inside the Slack renderers, tested directly and fast.

tests/rendering/test_rendering.py holds whole messages to Block Kit and to the README;
these pin the helpers they are built from: how a user is named, how a status,
a session type or a registration is worded, and the digest and Home layouts.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from bot import rendering
from bot.rendering import HomeSubscription, ListedSubscription, SessionLine, StatusChange
from bot.rendering.card import checkpoint_facts
from bot.rendering.text import code_span, user_ref
from bot.simulated.together import make_session
from bot.training.sessions import TrainingSession
from bot.training.transitions import CheckpointNews

SID = "123e4567-e89b-12d3-a456-426614174000"


def texts(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False)


# --- naming who did something ---------------------------------------------------------------

WHO_MESSAGES = {
    "muted": lambda who: rendering.muted_message(who, datetime(2026, 1, 2, tzinfo=UTC)),
    "unmuted": rendering.unmuted_message,
    "unsubscribed": rendering.unsubscribed_message,
    "stopped": lambda who: rendering.stop_requested_message(
        who, TrainingSession.model_validate(make_session(SID, "STOPPING"))
    ),
}


@pytest.mark.parametrize("kind", sorted(WHO_MESSAGES))
def test_a_slack_user_id_becomes_a_mention(kind: str) -> None:
    message = WHO_MESSAGES[kind]("U0123ABC")
    assert "<@U0123ABC>" in message["text"]
    assert "<@U0123ABC>" in message["blocks"][0]["text"]["text"]


@pytest.mark.parametrize("kind", sorted(WHO_MESSAGES))
@pytest.mark.parametrize("who", ["U1> <!channel", "<@U999>", "bob", "u0123abc"])
def test_anything_else_is_named_as_inert_text(kind: str, who: str) -> None:
    message = WHO_MESSAGES[kind](who)
    for text in (message["text"], message["blocks"][0]["text"]["text"]):
        assert "<@" not in text and "<!channel" not in text


@pytest.mark.parametrize("kind", sorted(WHO_MESSAGES))
def test_every_message_names_a_user_the_same_way(kind: str) -> None:
    """One rule for naming the user, whichever message says it."""
    for who in ("U0123ABC", "W0123ABC", "not <b>an id</b>"):
        first_words = rendering.unsubscribed_message(who)["blocks"][0]["text"]["text"].split(
            " unsubscribed"
        )[0]
        assert first_words in WHO_MESSAGES[kind](who)["blocks"][0]["text"]["text"]


def test_muted_says_until_when_in_each_readers_time_zone() -> None:
    until = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    message = rendering.muted_message("U0123ABC", until)
    assert rendering.slack_date(until) in message["blocks"][0]["text"]["text"]
    assert "errors still reach on-call" in message["text"]


def test_user_ref() -> None:
    assert user_ref("U0123ABC") == "<@U0123ABC>"
    assert user_ref("W0123ABC") == "<@W0123ABC>"
    assert user_ref("<@U1>") == "&lt;@U1&gt;"
    assert user_ref("") == "Someone"
    assert len(user_ref("x" * 500)) <= 100


# --- code spans -------------------------------------------------------------------------------


def test_a_code_span_is_inert_bounded_and_cannot_be_closed_early() -> None:
    assert code_span("abc", 40) == "`abc`"
    span = code_span("a`b<!here>&" + "x" * 100, 41)
    assert span.startswith("`") and span.endswith("`") and span.count("`") == 2
    assert "&lt;!here&gt;&amp;" in span and "<" not in span
    assert len(span) <= 43 and span.endswith("…`")
    assert code_span(None, 40) == code_span("", 40) == "—"


# --- words ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("TRAINING_SESSION_TYPE_TRAINER_AND_GENERATOR", "Trainer and generator"),
        ("SESSION_TYPE_TRAINER", "Trainer"),
        ("GENERATOR_ONLY", "Generator only"),
        (None, None),
        ("", None),
        ("   ", None),
    ],
)
def test_session_type_words(raw: str | None, words: str | None) -> None:
    assert rendering.session_type_words(raw) == words


def test_session_type_words_are_escaped() -> None:
    words = rendering.session_type_words("<!channel>")
    assert words is not None and "<" not in words


def test_registration_words_say_what_each_kind_is_for() -> None:
    assert rendering.registration_words("training", ["ml_a@rv_1"]) == "resumable state ml_a@rv_1"
    assert (
        rendering.registration_words("inference", ["model ml_b@rv_2", "adapter ml_c@rv_3"])
        == "deployable as model ml_b@rv_2 and adapter ml_c@rv_3"
    )
    assert rendering.registration_words("training", []) is None
    many = rendering.registration_words("training", ["a", "b", "c", "d"])
    assert many == "resumable state a, b, c"
    evil = rendering.registration_words("inference", ["<!here>"])
    assert evil is not None and "<" not in evil


def test_error_code_words_without_a_code() -> None:
    assert rendering.error_code_words(None) == ("Unknown error", None)
    assert rendering.error_code_words("") == ("Unknown error", None)


def test_status_words_of_a_known_status_in_either_form() -> None:
    assert rendering.status_words("TRAINING_SESSION_STATUS_ERROR") == "Error"
    assert rendering.status_words("ERROR") == "Error"


# --- one checkpoint, described the same way wherever it is shown --------------------------------


def test_a_checkpoint_is_described_alike_on_the_card_and_in_its_news() -> None:
    session = TrainingSession.model_validate(make_session(SID, checkpoints=1))
    cp = session.inference_checkpoints[0]
    words = rendering.registration_words("inference", cp.registered_names())
    assert words is not None
    card = texts(rendering.card(session))
    news = texts(
        rendering.checkpoint_message(
            session,
            [
                CheckpointNews(
                    kind="inference",
                    id=cp.id,
                    step=cp.step,
                    created_at=None,
                    registered=cp.registered_names(),
                    event="new",
                )
            ],
        )
    )
    for shown in (card, news):
        assert f"`{cp.id}`" in shown
        assert f"step {cp.step}" in shown
        assert words in shown


def test_checkpoint_facts() -> None:
    assert (
        checkpoint_facts("training", "ck-1", 40, ["ml_a@rv_1"], when="then")
        == "`ck-1` · then · step 40 · resumable state ml_a@rv_1"
    )
    assert checkpoint_facts("inference", "", None, []) == "(no id)"
    assert (
        checkpoint_facts("inference", "ck-2", 7, ["model m"])
        == "`ck-2` · step 7 · deployable as model m"
    )


# --- the channel's list -----------------------------------------------------------------------


def test_listed_subscription_says_its_filters_and_mute() -> None:
    until = datetime(2026, 1, 2, tzinfo=UTC)
    message = rendering.subscription_list(
        [
            ListedSubscription(
                SID, "alpha", "RUNNING", filters=frozenset({"status", "checkpoints"})
            ),
            ListedSubscription(
                "s2", None, None, muted_until=until, filters=frozenset({"errors-only"})
            ),
        ]
    )
    shown = texts(message)
    assert "*alpha* `" + SID + "` · :arrow_forward: Running · filters: checkpoints, status" in shown
    assert (
        f"`s2` · :grey_question: not checked yet · filters: errors-only · muted until {rendering.slack_date(until)}"
        in shown
    )
    assert message["text"] == "This channel has 2 subscriptions."


# --- the daily digest ------------------------------------------------------------------------


def test_digest_lists_sessions_and_changes() -> None:
    message = rendering.digest_message(
        "2026-01-02",
        [
            SessionLine(SID, "alpha", "TRAINING_SESSION_STATUS_RUNNING"),
            SessionLine("other", None, "ERROR"),
        ],
        [
            StatusChange(
                "alpha", "TRAINING_SESSION_STATUS_CREATING", "TRAINING_SESSION_STATUS_RUNNING"
            )
        ],
    )
    shown = texts(message)
    assert message["text"] == "Daily digest 2026-01-02: 2 watched sessions, 1 change."
    assert "daily digest, 2026-01-02" in shown
    assert "alpha · Running" in shown
    assert "`other` · Error" in shown  # no display name: the id, as code
    assert "• alpha: Creating → Running" in shown


def test_digest_empty_day() -> None:
    message = rendering.digest_message("2026-01-02", [], [])
    shown = texts(message)
    assert message["text"] == "Daily digest 2026-01-02: 0 watched sessions, 0 changes."
    assert "No sessions are watched in this channel." in shown
    assert "No status changes in the last 24 hours." in shown


def test_digest_cuts_long_lists_and_says_how_many_more() -> None:
    sessions = [SessionLine(f"s{i}", None, "RUNNING") for i in range(45)]
    changes = [StatusChange(f"s{i}", "CREATING", "RUNNING") for i in range(43)]
    shown = texts(rendering.digest_message("2026-01-02", sessions, changes))
    assert "…and 5 more" in shown and "…and 3 more" in shown
    assert "`s39`" in shown and "`s40`" not in shown


def test_digest_names_are_escaped() -> None:
    shown = texts(
        rendering.digest_message(
            "2026-01-02",
            [SessionLine(SID, "<!channel>", "RUNNING")],
            [StatusChange("<@U1>", "A", "B")],
        )
    )
    assert "<!channel>" not in shown and "<@U1>" not in shown


# --- App Home -------------------------------------------------------------------------------


def test_home_rows() -> None:
    view = rendering.home_view(
        [
            HomeSubscription(7, "C0123", SID, "alpha", "TRAINING_SESSION_STATUS_RUNNING"),
            HomeSubscription(8, "not a channel <!here>", "s2", None, None),
        ],
        [SessionLine("s3", "mine", "TRAINING_SESSION_STATUS_STOPPED")],
    )
    assert view["type"] == "home"
    shown = texts(view)
    assert "*alpha* in <#C0123> · :arrow_forward: Running" in shown
    assert "*`s2`* in not a channel &lt;!here&gt; · not checked yet" in shown
    values = [b["accessory"]["value"] for b in view["blocks"] if "accessory" in b]
    assert values == ["7", "8"]
    assert all(
        b["accessory"]["action_id"] == rendering.HOME_UNSUBSCRIBE
        for b in view["blocks"]
        if "accessory" in b
    )
    created = shown.split("Sessions you created")[1]
    assert "mine · Stopped" in created


def test_home_cuts_subscriptions_at_twenty() -> None:
    rows = [HomeSubscription(i, "C0123", f"s{i}", None, "RUNNING") for i in range(25)]
    view = rendering.home_view(rows, [])
    assert sum(1 for b in view["blocks"] if "accessory" in b) == 20
    assert "…and 5 more" in texts(view)
    assert "None that the bot is watching" in texts(view)
