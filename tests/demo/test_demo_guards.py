"""`rl-bot demo` is safe on a shared machine: its own temporary database whatever
DATABASE_URL says; a page API only its own page can use (the page's Host and
Origin, JSON bodies); a clock that refuses what is out of range. Through HTTP into
a running demo, as another web page, a DNS-rebinding page or another local user
would reach it."""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.demo.conftest import Demo

pytestmark = pytest.mark.slow

COMMAND = {"user": "UADA", "channel": "CDEMO", "text": "guard check: typed as ada"}


def _own(demo: Demo) -> dict[str, str]:
    """The headers the page itself sends with a POST."""
    return {"Origin": demo.url, "Content-Type": "application/json"}


def _said(demo: Demo) -> list[str]:
    answer = httpx.get(f"{demo.url}/demo/conversation?channel=CDEMO&user=UADA", timeout=10)
    assert answer.status_code == 200
    return [str(m.get("text", "")) for m in answer.json()["messages"]]


def _clock(demo: Demo, body: str) -> httpx.Response:
    return httpx.post(f"{demo.url}/demo/clock", content=body, headers=_own(demo), timeout=10)


def test_the_demo_never_touches_the_database_url_of_its_environment(demo: Demo) -> None:
    assert httpx.get(f"{demo.url}/demo/config", timeout=10).status_code == 200
    assert not demo.production.exists(), "the demo opened DATABASE_URL's database"


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"Origin": "http://evil.example"}, id="cross-site"),
        pytest.param({"Origin": "null"}, id="sandboxed-page"),
        pytest.param({"Origin": None}, id="no-origin"),
        pytest.param({"Content-Type": "text/plain"}, id="text-plain-body"),
        pytest.param({"Content-Type": "application/x-www-form-urlencoded"}, id="cross-site-form"),
        pytest.param(
            {"Host": "rebound.example:{port}", "Origin": "http://rebound.example:{port}"},
            id="dns-rebinding",
        ),
    ],
)
def test_a_request_not_from_the_page_is_refused_and_changes_nothing(
    demo: Demo, headers: dict[str, str | None]
) -> None:
    port = str(urlsplit(demo.url).port)
    sent = _own(demo) | {k: v.format(port=port) for k, v in headers.items() if v is not None}
    sent = {k: v for k, v in sent.items() if headers.get(k, "") is not None}
    before = _said(demo)
    minute = _clock(demo, "{}").json()["minute"]
    text = f"{COMMAND['text']} ({'/'.join(headers) or 'none'})"
    answer = httpx.post(
        f"{demo.url}/demo/command",
        content=json.dumps({**COMMAND, "text": text}),
        headers=sent,
        timeout=10,
    )
    assert 400 <= answer.status_code < 500, answer.text
    moved = httpx.post(f"{demo.url}/demo/clock", content='{"minutes": 5}', headers=sent, timeout=10)
    assert 400 <= moved.status_code < 500
    assert _clock(demo, "{}").json()["minute"] < minute + 1
    after = _said(demo)
    assert after == before
    assert text not in after


def test_a_rebinding_page_cannot_read_the_page_either(demo: Demo) -> None:
    port = urlsplit(demo.url).port
    read = httpx.get(
        f"{demo.url}/demo/conversation?channel=CDEMO&user=UADA",
        headers={"Host": f"rebound.example:{port}"},
        timeout=10,
    )
    assert read.status_code == 403
    assert "messages" not in read.text


def test_the_pages_own_request_is_served(demo: Demo) -> None:
    """The same request with the page's headers works: the refusals above are the guard's."""
    text = f"{COMMAND['text']} (the page's own)"
    answer = httpx.post(
        f"{demo.url}/demo/command",
        content=json.dumps({**COMMAND, "text": text}),
        headers=_own(demo),
        timeout=10,
    )
    assert answer.status_code == 200
    assert text in _said(demo)


@pytest.mark.parametrize(
    "body",
    [
        '{"minutes": 1e999}',
        '{"minutes": NaN}',
        '{"minutes": -Infinity}',
        '{"minutes": 1e300}',
        '{"minutes": 100000}',
        '{"minutes": -1}',
        '{"speed": 1e999}',
        '{"speed": 1e300}',
        '{"speed": 0}',
        '{"minutes": "ten"}',
        '{"minutes": true}',
        '{"minutes": "5"}',
        '{"speed": true}',
        '{"speed": "2"}',
    ],
)
def test_an_out_of_range_clock_step_is_a_400_and_the_world_goes_on(demo: Demo, body: str) -> None:
    before = _clock(demo, "{}").json()
    refused = _clock(demo, body)
    assert refused.status_code == 400
    assert "minutes" in refused.json()["error"]
    after: dict[str, Any] = _clock(demo, "{}").json()
    assert math.isfinite(after["minute"]) and before["minute"] <= after["minute"] < 60
    assert after["speed"] == before["speed"]


def test_a_step_in_range_moves_the_story(demo: Demo) -> None:
    before = _clock(demo, "{}").json()["minute"]
    moved = _clock(demo, '{"minutes": 0.5}')
    assert moved.status_code == 200
    assert moved.json()["minute"] >= before + 0.5


@pytest.mark.parametrize("path", ["/demo/command", "/demo/clock", "/demo/click"])
def test_a_body_nested_too_deep_or_too_big_is_a_4xx_and_changes_nothing(
    demo: Demo, path: str
) -> None:
    """JSON nested 20,000 deep was a 500 (a RecursionError), and a 50 MB body was
    read whole into memory and a 5 MB message posted into the channel."""
    before = _said(demo)
    minute = _clock(demo, "{}").json()["minute"]
    deep = "[" * 20_000 + "]" * 20_000
    nested = httpx.post(f"{demo.url}{path}", content=deep, headers=_own(demo), timeout=30)
    assert nested.status_code == 400, nested.text
    huge = json.dumps({**COMMAND, "text": "x" * 2_000_000, "minutes": 1})
    refused = httpx.post(f"{demo.url}{path}", content=huge, headers=_own(demo), timeout=30)
    assert refused.status_code == 413, refused.text
    assert _clock(demo, "{}").json()["minute"] < minute + 1
    assert _said(demo) == before


@pytest.mark.parametrize("path", ["/demo/command", "/demo/click", "/demo/home/open"])
def test_only_the_demos_people_can_type_or_click(demo: Demo, path: str) -> None:
    """A person the demo does not have was taken as they came, and the page drew
    their id as HTML in every viewer's message header."""
    stranger = '<img src=x onerror="document.title=1">'
    before = _said(demo)
    body = {**COMMAND, "user": stranger, "text": "typed by a stranger", "action_id": "x"}
    answer = httpx.post(f"{demo.url}{path}", content=json.dumps(body), headers=_own(demo))
    assert answer.status_code == 400, answer.text
    assert _said(demo) == before
