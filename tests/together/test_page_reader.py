"""A list page with a row no JSON reader takes (an integer of 5,000 digits,
arrays nested 1,000 deep): the page is read row by row, the odd row is left out
and named in the log, and the rest of the page is what a whole read gives.
Pure, plus the client against the Together-shaped server."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.simulated.together import FakeTogether, make_session
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.together.page_reader import read_page
from tests.support import examples

DEEP = "[" * 1000 + "]" * 1000
#: hypothesis raises the recursion limit while it runs a test: deeper than any limit
VERY_DEEP = "[" * 10_000 + "]" * 10_000
DIGITS = "7" * 5000
GOOD_A = "a0000000-0000-0000-0000-000000000001"
GOOD_B = "b0000000-0000-0000-0000-000000000002"
ODD_DEEP = "d0000000-0000-0000-0000-00000000deep"
ODD_DIGITS = "d0000000-0000-0000-0000-0000digits"


def _row(sid: str, metadata: str) -> str:
    """A session row whose `metadata` is the raw JSON text `metadata`, placed
    before its id (the id is found all the same)."""
    session = make_session(sid, metadata="@@")
    text = json.dumps(session)
    return "{" + f'"metadata": {metadata}, ' + text[1:].replace('"metadata": "@@", ', "")


def _page(rows: list[str], meta: str = '{"has_more": false, "next_cursor": ""}') -> bytes:
    return ('{"data": [' + ", ".join(rows) + '], "meta": ' + meta + "}").encode()


def test_an_odd_row_is_left_out_and_named_and_the_rest_is_the_page(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tricky = '{"note": "a ] } [ { \\" \\\\ quote", "list": [1, [2, {"x": "]"}]]}'
    rows = [
        _row(GOOD_A, tricky),
        _row(ODD_DEEP, DEEP),
        _row(ODD_DIGITS, '{"n": ' + DIGITS + "}"),
        _row(GOOD_B, "{}"),
    ]
    with pytest.raises((ValueError, RecursionError)):
        json.loads(_page(rows))  # what a whole read does
    with caplog.at_level(logging.WARNING, logger="bot.together.page_reader"):
        page = read_page(_page(rows))
    assert [r["id"] for r in page["data"]] == [GOOD_A, GOOD_B]
    assert page["data"][0]["metadata"] == json.loads(tricky)
    assert page["meta"] == {"has_more": False, "next_cursor": ""}
    skipped = [r.getMessage() for r in caplog.records]
    assert len(skipped) == 2
    assert ODD_DEEP in skipped[0] and "nested too deep" in skipped[0]
    assert ODD_DIGITS in skipped[1] and "4300" in skipped[1]


def test_a_bare_list_and_a_page_read_whole_alike() -> None:
    rows = [_row(GOOD_A, "{}"), _row(ODD_DEEP, DEEP)]
    assert [r["id"] for r in read_page(("[" + ",".join(rows) + "]").encode())] == [GOOD_A]
    plain = _page([_row(GOOD_A, '{"k": [1, 2]}')])
    assert read_page(plain) == json.loads(plain)


@pytest.mark.parametrize(
    "body",
    [
        _page([_row(GOOD_A, "{}")], meta='{"deep": ' + DEEP + "}"),  # the frame itself
        _page([_row(GOOD_A, "{}")], meta='{"n": ' + DIGITS + "}"),
        _page([_row(GOOD_A, DEEP)])[:-40],  # cut short
        b'{"data": [' + DEEP.encode() + b"] ",
        '"caf\xe9"'.encode("latin-1"),  # not UTF-8
        b"<html>" + DEEP.encode(),
    ],
    ids=["deep-frame", "long-frame", "cut", "unclosed", "latin-1", "html"],
)
def test_a_page_whose_frame_cannot_be_read_is_refused(body: bytes) -> None:
    with pytest.raises(ValueError):
        read_page(body)


_leaves = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_json = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(_json, max_size=5), st.integers(min_value=0, max_value=5))
def test_every_readable_row_is_kept_in_order(metadata: list[Any], odd_at: int) -> None:
    rows = [
        _row(f"{i:08d}-0000-0000-0000-000000000000", json.dumps(m)) for i, m in enumerate(metadata)
    ]
    rows.insert(min(odd_at, len(rows)), _row(ODD_DEEP, VERY_DEEP))
    page = read_page(_page(rows))
    assert [r["metadata"] for r in page["data"]] == metadata


@pytest.fixture
async def client() -> AsyncIterator[tuple[TogetherClient, FakeTogether]]:
    with FakeTogether() as fake:
        async with httpx.AsyncClient() as http:
            yield TogetherClient(http, base_url=fake.base_url, api_key=fake.api_key), fake


async def test_the_client_lists_around_odd_rows_and_a_get_of_one_is_a_bad_answer(
    client: tuple[TogetherClient, FakeTogether],
) -> None:
    together, fake = client
    fake.add(GOOD_A)
    fake.add(ODD_DEEP, metadata=fake.raw_json(DEEP))
    fake.add(ODD_DIGITS, metadata={"wandb": {"step": fake.raw_json(DIGITS)}})
    fake.add(GOOD_B)
    sessions, cursor = await together.list_sessions(status="RUNNING")
    assert [s.id for s in sessions] == [GOOD_A, GOOD_B] and cursor is None
    rows, _ = await together.list_session_rows(status="RUNNING", limit=2)
    assert [r["id"] for r in rows] == [GOOD_A]  # a short page: the odd row left out
    for odd in (ODD_DEEP, ODD_DIGITS):
        with pytest.raises(TogetherError) as caught:
            await together.get_session_row(odd)
        assert caught.value.kind == "bad_response"
        with pytest.raises(TogetherError) as caught:
            await together.get_session(odd)
        assert caught.value.kind == "bad_response"
