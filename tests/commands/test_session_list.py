"""`/rl-session ls` (bot/session_list.py): the grammar, the More value, and
one page fetched from the Together-shaped server over real sockets. Fast: no
bot process."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import pytest

from bot.commands.ls import fetch_page, keep
from bot.commands.ls_query import ListQuery, More, creators, more_value, parse_args, read_more
from bot.rendering.ls_page import session_list_page
from bot.simulated import FakeTogether
from bot.together.client import TogetherClient
from tests import together_fixtures
from tests.block_kit import block_kit_problems

# the shared Together server and client fixtures (pytest finds them by these names)
fake = together_fixtures.fake
client = together_fixtures.client

NOW = datetime(2026, 3, 1, 11, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("words", "query"),
    [
        ([], ListQuery("running")),
        (["all"], ListQuery("all")),
        (["ERROR", "mine"], ListQuery("error", "mine")),
        (["creating", "<@U0123ABC|ana>"], ListQuery("creating", "U0123ABC")),
        (
            ["<@W0123ABC>", "model=Qwen/Qwen3.5-4B"],
            ListQuery("running", "W0123ABC", "Qwen/Qwen3.5-4B"),
        ),
    ],
)
def test_parse_args(words: list[str], query: ListQuery) -> None:
    assert parse_args(words) == query


@pytest.mark.parametrize(
    "words",
    [
        ["running", "error"],
        ["mine", "<@U0123ABC>"],
        ["model="],
        ["model=a", "model=b"],
        ["model=" + "x" * 201],
        ["<!channel>"],
        ["stopped"],
    ],
)
def test_parse_args_refuses(words: list[str]) -> None:
    problem = parse_args(words)
    assert isinstance(problem, str) and "ls [running|creating|error|all]" in problem
    assert "<!channel>" not in problem  # user text is never echoed


@pytest.mark.parametrize("word", ["@ben", "<@ben>"])
def test_a_person_typed_without_the_picker_is_explained_as_follow_does(word: str) -> None:
    from bot.commands.parser import parse

    problem = parse_args(["running", word])
    assert isinstance(problem, str) and "pick the person from Slack's list" in problem
    assert problem in parse(f"follow {word}").reason
    assert "<@" not in problem  # echoed inert


def test_creators_map_slack_users_to_together_ids() -> None:
    users = {"user_123": "U0ANA", "user_456": "U0BOB", "user_789": "U0BOB"}
    assert creators(ListQuery(), caller="U0ANA", user_map=users) is None
    assert creators(ListQuery(who="mine"), caller="U0ANA", user_map=users) == ["user_123"]
    assert creators(ListQuery(who="U0BOB"), caller="U0ANA", user_map=users) == [
        "user_456",
        "user_789",
    ]
    refused = creators(ListQuery(who="mine"), caller="U0EVE", user_map=users)
    assert isinstance(refused, str) and "you" in refused
    refused = creators(ListQuery(who="U0EVE"), caller="U0ANA", user_map=users)
    assert isinstance(refused, str) and "<@U0EVE>" in refused


def test_more_value_round_trips_and_refuses_anything_else() -> None:
    more = More(ListQuery("all", "mine", "Qwen/Qwen3.5-4B"), "cursor-1", 101)
    value = more_value(more)
    assert value is not None and len(value) < 2000
    assert read_more(value) == more
    assert more_value(More(ListQuery(), "c" * 1001, 101)) is None
    good = json.loads(value)
    for bad in (
        "not json",
        "[1]",
        json.dumps(good | {"s": "stopped"}),
        json.dumps(good | {"a": ""}),
        json.dumps(good | {"n": True}),
        json.dumps(good | {"n": 0}),
        json.dumps(good | {"w": "<!channel>"}),
        json.dumps(good | {"m": ""}),
        json.dumps(good | {"m": "x" * 201}),
    ):
        assert read_more(bad) is None, bad


def test_keep_applies_the_model_and_several_creators() -> None:
    from bot.training.sessions import TrainingSession

    s = TrainingSession(id="s1", base_model="Qwen/Qwen3.5-4B", created_by="user_1")
    assert keep(s, ListQuery(model="qwen/qwen3.5-4b"), None)
    assert not keep(s, ListQuery(model="Llama"), None)
    assert keep(s, ListQuery(), ["user_1", "user_2"])
    assert not keep(s, ListQuery(), ["user_2", "user_3"])
    assert keep(s, ListQuery(), ["user_9"])  # one creator: Together filtered already


async def test_250_sessions_in_three_pages(fake: FakeTogether, client: TogetherClient) -> None:
    for i in range(250):
        fake.add(f"ls-{i:04d}", "RUNNING")
    fake.add("ls-err", "ERROR")
    query = ListQuery("running")
    seen: list[str] = []
    after: str | None = None
    number = 1
    messages = []
    while True:
        page = await fetch_page(client, query, created_by=None, after=after)
        more = more_value(More(query, page.after, number + len(page.rows))) if page.after else None
        message = session_list_page(
            page.rows, title="Running sessions", now=NOW, first_number=number, more_value=more
        )
        assert block_kit_problems(message) == []
        messages.append(message)
        seen += [row.session.id for row in page.rows]
        if more is None:
            break
        again = read_more(more)
        assert again is not None
        after, number = again.after, again.first_number
    assert len(messages) == 3
    assert seen == [f"ls-{i:04d}" for i in range(250)]
    assert "sessions 201–250." in messages[-1]["text"]
    lists = [p for p in fake.paths if urlsplit(p).path.endswith("/training-sessions")]
    assert len(lists) == 3
    assert parse_qs(urlsplit(lists[0]).query)["status[]"] == ["TRAINING_SESSION_STATUS_RUNNING"]
    # The resource column comes from one list of live resources per page.
    assert sum("/model-resources?" in p for p in fake.paths) == 3


async def test_a_page_filters_by_creator_and_model_and_shows_resources(
    fake: FakeTogether, client: TogetherClient
) -> None:
    fake.add("m-1", "RUNNING", created_by="user_1", model_resources_id="res-a")
    fake.add("m-2", "RUNNING", created_by="user_2", base_model="meta/Llama-3-8B")
    fake.add("m-3", "RUNNING", created_by="user_1", base_model="meta/Llama-3-8B")
    fake.add_resource("res-a", "READY")
    one = await fetch_page(client, ListQuery(), created_by=["user_1"])
    assert [r.session.id for r in one.rows] == ["m-1", "m-3"]
    assert one.rows[0].resource is not None and one.rows[0].resource.id == "res-a"
    assert parse_qs(urlsplit(fake.paths[0]).query)["created_by"] == ["user_1"]
    llama = await fetch_page(client, ListQuery(model="meta/llama-3-8b"), created_by=None)
    assert [r.session.id for r in llama.rows] == ["m-2", "m-3"]
    both = await fetch_page(client, ListQuery(), created_by=["user_2", "user_3"])
    assert [r.session.id for r in both.rows] == ["m-2"]


def test_with_progress_shows_the_measured_rate_and_a_stall() -> None:
    from datetime import timedelta

    from bot.commands.ls import with_progress
    from bot.rendering.ls_page import SessionRow
    from bot.training.poll_progress import PollProgress
    from bot.training.sessions import TrainingSession

    row = SessionRow(session=TrainingSession(id="s1", status="TRAINING_SESSION_STATUS_RUNNING"))
    since = datetime(2026, 3, 1, 10, 0)
    stored_json = {
        "step": "7",
        "since": since.isoformat(),
        "running": True,
        "rate": 2.5,
        "anchored": True,
        "seen_at": since.isoformat(),
    }
    at = since + timedelta(minutes=20)
    stored = PollProgress.model_validate(stored_json)
    stalled = with_progress(row, stored, at, timedelta(minutes=15))
    assert stalled.rate == 2.5 and stalled.stalled
    assert not with_progress(row, stored, at, timedelta(minutes=30)).stalled
    assert not with_progress(row, stored, at, None).stalled
    assert with_progress(row, None, at, timedelta(minutes=15)) == row  # not watched


async def test_live_resources_is_one_paginated_pass_that_ends_when_all_are_found(
    fake: FakeTogether, client: TogetherClient
) -> None:
    from bot.commands.ls import live_resources

    for i in range(250):
        fake.add_resource(f"res-{i:04d}", "READY" if i % 2 else "PENDING")
    fake.add_resource("res-stopped", "STOPPED")
    found = await live_resources(client, {"res-0003", "res-0150", "res-stopped", "res-none"})
    assert set(found) == {"res-0003", "res-0150"}  # stopped and unknown are not live
    pages = [p for p in fake.paths if "/model-resources?" in p]
    assert len(pages) == 3  # every page, since two are never found
    fake.reset_counts()
    early = await live_resources(client, {"res-0001", "res-0099"})
    assert set(early) == {"res-0001", "res-0099"}
    assert sum("/model-resources?" in p for p in fake.paths) == 1  # found on the first page
    fake.reset_counts()
    assert await live_resources(client, {"res-0249"}, max_pages=2) == {}
    assert sum("/model-resources?" in p for p in fake.paths) == 2


def test_an_idle_resource_is_flagged_from_the_bots_own_follow_up() -> None:
    from bot.commands.ls import with_progress
    from bot.rendering.ls_page import SessionRow
    from bot.simulated.together import make_model_resource
    from bot.training.poll_progress import PollProgress
    from bot.training.resources import ModelResource
    from bot.training.sessions import TrainingSession

    at = datetime(2026, 3, 1, 10, 30)
    ready = ModelResource.model_validate(make_model_resource("res-a", "READY"))
    stopped = TrainingSession(
        id="s1", status="TRAINING_SESSION_STATUS_STOPPED", model_resources_id="res-a"
    )
    row = SessionRow(session=stopped, resource=ready)
    idle_json = {"idle_check": {"resource_id": "res-a", "idle_since": "2026-03-01T10:00:00"}}
    idle = PollProgress.model_validate(idle_json)
    assert with_progress(row, idle, at, None).idle_resource
    alerted = PollProgress.model_validate(
        {"idle_check": idle_json["idle_check"] | {"done": "alerted"}}
    )
    assert with_progress(row, alerted, at, None).idle_resource
    # Busy (taken by another session on this page, or as the check found it),
    # not READY any more, or about another resource: no flag.
    assert not with_progress(row, idle, at, None, busy={"res-a"}).idle_resource
    busy = PollProgress.model_validate({"idle_check": {"resource_id": "res-a", "done": "busy"}})
    assert not with_progress(row, busy, at, None).idle_resource
    pending = ModelResource.model_validate(make_model_resource("res-a", "PENDING"))
    assert not with_progress(SessionRow(stopped, resource=pending), idle, at, None).idle_resource
    other = PollProgress.model_validate(
        {"idle_check": {"resource_id": "res-b", "idle_since": "2026-03-01T10:00:00"}}
    )
    assert not with_progress(row, other, at, None).idle_resource
    running = SessionRow(
        TrainingSession(
            id="s2", status="TRAINING_SESSION_STATUS_RUNNING", model_resources_id="res-a"
        ),
        resource=ready,
    )
    assert not with_progress(running, idle, at, None).idle_resource
