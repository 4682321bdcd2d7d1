"""Property-based tests (hypothesis, no processes) of what untrusted input reaches:
the `/rl-session` parser and the id check, and the session model fed arbitrary JSON.

tests/rendering/test_rendering.py already holds the renderers to Block Kit limits for
arbitrary *strings* in a well-typed session; here the inputs are arbitrary
*shapes* (any JSON value in any field) and arbitrary command text.
"""

from __future__ import annotations

import json
import re
from typing import Any, get_args
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from bot.commands.parser import MAX_COMMAND_TEXT, Command, Verb, parse
from bot.commands.session_ref import is_session_ref
from bot.rendering import (
    ListedSubscription,
    card,
    help_message,
    notice,
    oncall_alert,
    subscription_list,
    transition_message,
)
from bot.rendering.terminal import as_text
from bot.slack.listeners.commands import _immediate
from bot.together.client import TogetherClient
from bot.together.errors import USER_MESSAGES, TogetherError
from bot.training.sessions import (
    MAX_SESSION_ID_LENGTH,
    SESSION_ID_RE,
    TrainingSession,
    is_session_id,
)
from tests.block_kit import block_kit_problems
from tests.support import examples

SID = "123e4567-e89b-12d3-a456-426614174000"

PROPERTY = settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Our own `<!date^…>` tokens may stay; any other `<` in a text means a live
# mention or link was built from input.
DATE_TOKEN_RE = re.compile(r"<!date\^-?\d+\^\{date_short_pretty\} at \{time\}\|[^<>]*>")
LIVE_TOKENS = ("<!channel>", "<!here>", "<!everyone>", "<@U", "<#C", "<!subteam", "<http")

SLACK_MARKUP = [
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<@U0123ABC>",
    "<@W0123ABC|bob>",
    "<#C0123|general>",
    "<!subteam^S0123|oncall>",
    "<https://evil.example|click me>",
    "<mailto:a@b.c|mail>",
    "<!date^1700000000^{date}|x>",
    "*bold*",
    "_it_",
    "~s~",
    "`code`",
    "```block```",
    "> quote",
    "&lt;!channel&gt;",
    "&amp;",
    ":smile:",
]
CONTROL = [chr(c) for c in range(0x20)] + ["\x7f", "\x85", "\u2028", "\u2029", "\u202e", "\ufeff"]
VERBS = ["subscribe", "unsubscribe", "show", "list", "help", "SUBSCRIBE", "Help", "?", "--help"]
# Words of the rest of the grammar, so hypothesis reaches its deeper branches.
GRAMMAR = ["mute", "unmute", "digest", "on", "off", "30m", "1h30m", "09:00", "23:59", "UTC"]
GRAMMAR += ["Europe/Berlin", "America", "Etc", "x" * 300, "status", "checkpoints", "errors-only"]
GRAMMAR += ["alert", "alerts", "budget", "*", "<", "&lt;=", ">", "0.2", "nan", "for", "page"]
GRAMMAR += ["steps_per_min", "$200", "$5/day", "$0", "31d", "chart", "ls", "follow", "unfollow"]
ID_VERBS = ("show", "subscribe", "unsubscribe", "mute", "unmute", "chart")
#: verbs that name no single session, or one only inside a rule (`_rule_ids`)
NO_ID_VERBS = ("help", "list", "digest", "ls", "follow", "unfollow", "alerts", "alert", "budget")


def _rule_ids(command: Command) -> list[str]:
    """The session ids (or `*`) a command's metric rule, budget or rule listing names."""
    named = [
        command.metric_rule.session_id if command.metric_rule else None,
        command.budget.session_id if command.budget else None,
        command.rules_of if isinstance(command.rules_of, str) else None,
    ]
    return [n for n in named if n is not None]


_piece = st.one_of(
    st.sampled_from(SLACK_MARKUP + CONTROL + VERBS + GRAMMAR + [SID, " ", "/", "..", "%2F", "\t"]),
    st.text(max_size=30),
    st.from_regex(SESSION_ID_RE, fullmatch=True),
)
command_text = st.one_of(
    st.text(max_size=10_000),
    st.lists(_piece, max_size=40).map(" ".join),
    st.lists(_piece, max_size=40).map("".join),
    st.builds(lambda p, n: p * n, _piece, st.integers(1, 2_000)).map(lambda t: t[:10_000]),
)
valid_ids = st.from_regex(SESSION_ID_RE, fullmatch=True)


def inert(message: dict[str, Any]) -> None:
    for text in _texts(message):
        rest = DATE_TOKEN_RE.sub("", text)
        assert "<" not in rest and ">" not in rest, text[:300]
    dumped = json.dumps(message, ensure_ascii=False)
    for token in LIVE_TOKENS:
        assert token not in DATE_TOKEN_RE.sub("", dumped), token


def _texts(node: Any) -> list[str]:
    if isinstance(node, dict):
        out: list[str] = []
        for key, value in node.items():
            out += [value] if key == "text" and isinstance(value, str) else _texts(value)
        return out
    if isinstance(node, list):
        return [t for item in node for t in _texts(item)]
    return []


def valid(message: dict[str, Any]) -> None:
    assert block_kit_problems(message) == []


# --- the command parser ---------------------------------------------------------------


@PROPERTY
@given(text=st.one_of(st.none(), command_text))
@example(text="<!channel>")
@example(text="CHART")  # usage words that show `<id>` or `model=<name>` escape them
@example(text="follow all model=a model=b")
@example(text="ls all model=a model=b")
@example(text="subscribe <@U0123ABC>")
@example(text="<https://evil.example/../x|123e4567>")
@example(text="show " + "a" * 129)
@example(text="subscribe ../../etc/passwd")
@example(text="unsubscribe %2e%2e%2fadmin")
@example(text="\x00" * 10_000)
@example(text="digest on 09:00 America")  # a directory of the tz database, not a zone
@example(text="digest on 09:00 " + "x" * 300)  # a file name too long
@example(text="digest on 09:00 <!channel>")
@example(text=f"mute {SID} <!here>")
@example(text="ALERTS")
@example(text=f"alert {SID} reward < 0.2 for 10m page")
@example(text="budget * $5/day")
def test_parse_never_raises_and_yields_an_id_or_an_answer(text: str | None) -> None:
    command = parse(text)
    assert isinstance(command, Command)
    if command.session_id is not None:
        # An id or a display name: one printable word of the text, never one of
        # Slack's tokens. Only an id-shaped word ever goes into a URL
        # (`TogetherClient.session_url`); a name is looked up in the list.
        assert command.problem is None
        assert command.verb in ID_VERBS
        assert is_session_ref(command.session_id)
        assert command.session_id in (text or "")
    elif command.problem is None:
        # a verb about no one session, or about rules whose id (or `*`) is as well-formed
        assert command.verb in NO_ID_VERBS, command.verb
        for rule_id in _rule_ids(command):
            assert rule_id == "*" or (is_session_ref(rule_id) and rule_id in (text or "")), rule_id
    if command.verb in ID_VERBS and command.problem is None:
        assert command.session_id is not None
    # Whatever the text, the immediate answer (usage or refusal) is valid Block Kit
    # and carries nothing from the text that could ping or link.
    if command.problem or command.verb == "help":
        answer = _immediate(command)
        assert answer["response_type"] == "ephemeral"
        valid(answer)
        inert(answer)


@PROPERTY
@given(
    verb=st.sampled_from(["", "show ", "subscribe ", "unsubscribe ", "SubScribe "]), sid=valid_ids
)
def test_parse_finds_any_valid_id(verb: str, sid: str) -> None:
    assume(sid.lower() not in {*get_args(Verb), "-h", "--help", "?"})  # a verb wins over an id
    command = parse(f"  {verb}{sid}\n")
    assert command.problem is None
    assert command.session_id == sid
    assert command.verb == (verb.strip().lower() or "show")


@PROPERTY
@given(
    verb=st.sampled_from(["", "subscribe ", "unsubscribe ", "unmute "]),
    junk=st.one_of(
        st.sampled_from(SLACK_MARKUP),
        st.text(min_size=1).filter(lambda t: not t.split() or not is_session_id(t.split()[0])),
    ),
)
def test_markup_and_junk_never_become_an_id(verb: str, junk: str) -> None:
    command = parse(verb + junk)
    assert command.session_id is None or is_session_ref(command.session_id)
    if command.session_id is not None:
        assert "<" not in command.session_id and not any(c.isspace() for c in command.session_id)


def test_parse_caps_what_it_reads() -> None:
    # A 10k text of ids is never parsed past the cap: one word per 4k chars at most.
    command = parse(SID + " " * (MAX_COMMAND_TEXT + 10) + SID)
    assert command == Command("show", session_id=SID)


# --- session ids -------------------------------------------------------------------------


FORBIDDEN = ["/", ".", "%", " ", "\t", "\n", "\r", "\x0b", "\x0c", "\u00a0", "\u3000", "\\", "?"]


@PROPERTY
@given(
    before=st.text(max_size=60),
    bad=st.sampled_from(FORBIDDEN),
    after=st.text(max_size=60),
)
def test_ids_with_path_percent_or_whitespace_are_refused(before: str, bad: str, after: str) -> None:
    assert not is_session_id(before + bad + after)


@PROPERTY
@given(text=st.text(min_size=MAX_SESSION_ID_LENGTH + 1, max_size=400))
def test_overlong_ids_are_refused(text: str) -> None:
    assert not is_session_id(text)
    assert not is_session_id(("a" * MAX_SESSION_ID_LENGTH) + text[:1])


@PROPERTY
@given(text=st.text(max_size=200))
def test_accepted_ids_are_safe_path_segments(text: str) -> None:
    client = TogetherClient(None, base_url="https://api.example/v1", api_key="k")  # type: ignore[arg-type]
    if is_session_id(text):
        assert 1 <= len(text) <= MAX_SESSION_ID_LENGTH
        assert text.isascii() and not any(c in text for c in "/.%\\?#") and text.strip() == text
        assert quote(text, safe="") == text  # nothing to encode, nothing to decode
        assert client.session_url(text) == f"https://api.example/v1/rl/training-sessions/{text}"
    else:
        with pytest.raises(TogetherError) as refused:
            client.session_url(text)
        assert refused.value.kind == "invalid_id"
        assert refused.value.user_message == USER_MESSAGES["invalid_id"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        ".",
        "..",
        "../x",
        "a/b",
        "%2F",
        "a%2Fb",
        "%2e%2e",
        "a b",
        "a\u200bb",
        "a" * 129,
        "ｓｅｓｓｉｏｎ",
        "café",
        "١٢٣",
        "\u0430bc",
        "-abc",
        "_abc",
        "abc\n",
    ],
)
def test_known_bad_ids(text: str) -> None:
    assert not is_session_id(text)


def test_known_good_ids() -> None:
    for text in (SID, "a", "A" * 128, "sess_01H-xyz"):
        assert is_session_id(text)


# --- the session model over arbitrary JSON ----------------------------------------------------


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=300),
    st.sampled_from(SLACK_MARKUP),
    st.sampled_from(["2026-01-02T00:00:05Z", "2026-01-02T00:00:05", "9999-12-31T23:59:59Z"]),
    st.sampled_from(["TRAINING_SESSION_STATUS_RUNNING", "TRAINING_SESSION_STATUS_PAUSED", "42"]),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=12), children, max_size=4),
    ),
    max_leaves=12,
)
KNOWN_FIELDS = [
    "status",
    "display_name",
    "base_model",
    "model_resources_id",
    "created_by",
    "created_at",
    "updated_at",
    "resume_from_checkpoint_id",
    "step",
    "error",
    "lora_config",
    "inference_checkpoints",
    "training_checkpoints",
    "metadata",
    "policy_state",
    "type",
]
NESTED = {
    "error": ["code", "message", "occurred_at"],
    "lora_config": ["rank", "alpha", "dropout", "seed", "train_unembed"],
    "policy_state": [
        "applied_weights_version",
        "target_weights_version",
        "trainer_step",
        "pending_publish",
    ],
    "metadata": ["wandb"],
}
CHECKPOINT_FIELDS = ["id", "created_at", "step", "registration"]
REGISTRATION_FIELDS = ["model_name", "registered_at", "model", "adapter", "id", "revision_id"]


def _some_of(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(keys), json_values, max_size=len(keys))


@st.composite
def checkpoints(draw: st.DrawFn) -> Any:
    def one() -> Any:
        cp = draw(_some_of(CHECKPOINT_FIELDS))
        if draw(st.booleans()):
            cp["registration"] = draw(
                st.one_of(
                    _some_of(REGISTRATION_FIELDS),
                    st.fixed_dictionaries(
                        {"model": _some_of(["id", "revision_id"]), "adapter": json_values}
                    ),
                )
            )
        return cp

    return draw(
        st.one_of(json_values, st.builds(lambda n: [one() for _ in range(n)], st.integers(0, 4)))
    )


@st.composite
def api_sessions(draw: st.DrawFn) -> dict[str, Any]:
    """A valid session whose fields (known, nested and unknown) hold any JSON."""
    data: dict[str, Any] = {"id": SID, "status": "TRAINING_SESSION_STATUS_RUNNING"}
    data.update(draw(st.dictionaries(st.sampled_from(KNOWN_FIELDS), json_values, max_size=6)))
    for name, keys in NESTED.items():
        if draw(st.booleans()):
            data[name] = draw(_some_of(keys))
    for name in ("inference_checkpoints", "training_checkpoints"):
        if draw(st.booleans()):
            data[name] = draw(checkpoints())
    data.update(draw(st.dictionaries(st.text(max_size=20), json_values, max_size=3)))
    data["id"] = SID
    return data


@PROPERTY
@given(data=api_sessions())
@example(data={"id": SID, "display_name": 5, "step": {"n": 1}, "lora_config": {"rank": "auto"}})
@example(data={"id": SID, "created_at": 10**20, "error": {"occurred_at": [1]}})
@example(data={"id": SID, "inference_checkpoints": [{"id": 7, "registration": {"model": "x"}}]})
@example(data={"id": SID, "policy_state": {"pending_publish": "maybe"}, "base_model": ["a"]})
@example(data={"id": SID, "metadata": {"wandb": {"url": "<!channel>"}}, "status": 3})
@example(
    data={
        "id": SID,
        "metadata": {"wandb": {"entity": "<!here>", "project": "a|b", "run_id": "x" * 4000}},
        "policy_state": {"trainer_step": "1e999999999", "applied_weights_version": 10**400},
        "lora_config": {"seed": "<@U1>", "dropout": float("nan")},
        "step": "12345678901234567",
        "type": "<!channel>",
    }
)
def test_any_json_in_the_fields_parses_and_renders_within_limits(data: dict[str, Any]) -> None:
    session = TrainingSession.model_validate(data)
    assert session.id == SID
    assert isinstance(session.status, str) and session.status
    # The poller stores this snapshot and delivery re-reads it: it must round-trip.
    snapshot = session.model_dump(mode="json")
    json.dumps(snapshot)
    again = TrainingSession.model_validate(snapshot)
    assert again.status == session.status
    for message in (
        card(session),
        card(session, subscribed=True),
        transition_message(session, "TRAINING_SESSION_STATUS_RUNNING", session.status, ended=False),
        oncall_alert(session, permalink=None, mention=None),
        subscription_list(
            [ListedSubscription(session.id, session.display_name, session.status, None)]
        ),
    ):
        valid(message)
        inert(message)
        as_text(message)


@PROPERTY
@given(
    data=api_sessions(),
    # Filtered here rather than assumed in the body: a string id would throw the
    # whole drawn session away, not just the id.
    bad_id=st.one_of(json_values.filter(lambda v: not isinstance(v, str)), st.just(None)),
)
def test_only_a_missing_or_non_string_id_is_refused(data: dict[str, Any], bad_id: Any) -> None:
    broken = dict(data)
    if bad_id is None and data:
        del broken["id"]
    else:
        broken["id"] = bad_id
    with pytest.raises(ValidationError):
        TrainingSession.model_validate(broken)


def test_help_and_notices_are_valid() -> None:
    valid(help_message())
    for text in USER_MESSAGES.values():
        valid(notice(f":warning: {text}"))
