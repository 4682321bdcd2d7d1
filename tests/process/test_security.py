"""Security: requests the bot cannot verify, ids and button payloads that
try to escape, allowlists, and secrets that must never leave where they belong.

Everything goes through a real `rl-bot serve` (HTTP, signed like Slack signs)
against the fake Slack and Together servers, except the start-up checks, which
run `python -m bot serve` with a bad configuration and read its exit.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from pydantic import SecretStr
from starlette.requests import Request
from starlette.responses import Response

from bot.simulated import FakeSlack, FakeTogether, block_action_body, sign, slash_command_body
from bot.slack.body_budget import SMALL_BODY_BYTES, BodyBudget
from bot.slack.web import SlackRequestGate
from bot.training.sessions import is_session_id
from tests.support import BOT_TOKEN, SIGNING_SECRET, BotFactory, query, wait_until
from tests.support.rig import Rig, shared_rig

SID = "123e4567-e89b-12d3-a456-426614174000"
#: what a test here checks is HTTP, signing and Slack's view; the database only stores
BACKEND_FREE = pytest.mark.backend_independent(
    "requests, signatures and bodies; the database only stores"
)
NOT_AN_ID = "not a session id"


rig = shared_rig()


@pytest.fixture
def fresh(rig: Rig) -> Iterator[Rig]:
    with rig.fresh() as shared:
        yield shared


def nothing_happened(rig: Rig) -> None:
    """No request reached Together, nothing was said in Slack, nothing stored."""
    time.sleep(0.5)  # anything started in the background would have shown by now
    assert rig.together.total_requests == 0, rig.together.paths
    assert rig.together.paths == []
    assert said(rig.slack) == [], [c.method for c in said(rig.slack)]
    assert rig.slack.response_attempts == []
    for table in ("subscriptions", "watched_sessions", "outbox"):
        assert rig.query(f"SELECT count(*) FROM {table}") == [(0,)], table


def said(slack: FakeSlack) -> list[Any]:
    """Slack calls other than Bolt's one-off `auth.test` (which posts nothing)."""
    return [c for c in slack.calls if c.method != "auth.test"]


def post(rig: Rig, body: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{rig.bot.url}/slack/events", content=body, headers=headers, timeout=10)


# --- signatures -----------------------------------------------------------------------------


@BACKEND_FREE
def test_unverifiable_requests_get_401_and_do_nothing(fresh: Rig) -> None:
    rig = fresh
    rig.together.add(SID)
    url = rig.slack.response_url("forged")
    body = slash_command_body(f"subscribe {SID}", response_url=url)
    click = block_action_body("rl_subscribe", SID, response_url=url, is_ephemeral=True)
    now = int(time.time())
    good = sign(SIGNING_SECRET, body)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    cases: dict[str, tuple[str, dict[str, str]]] = {
        "wrong secret": (body, sign("not-the-signing-secret", body)),
        "wrong secret, click": (click, sign("not-the-signing-secret", click)),
        "no headers": (body, form),
        "no signature": (
            body,
            {k: v for k, v in good.items() if k != "X-Slack-Signature"},
        ),
        "no timestamp": (
            body,
            {k: v for k, v in good.items() if k != "X-Slack-Request-Timestamp"},
        ),
        "replayed (6 min old)": (body, sign(SIGNING_SECRET, body, now - 6 * 60)),
        "replayed click": (click, sign(SIGNING_SECRET, click, now - 6 * 60)),
        "from the future": (body, sign(SIGNING_SECRET, body, now + 6 * 60)),
        "body changed after signing": (
            body.replace("subscribe", "unsubscribe"),
            good,
        ),
        "garbage signature": (body, {**good, "X-Slack-Signature": "v0=zz"}),
        "non-numeric timestamp": (body, {**good, "X-Slack-Request-Timestamp": "yesterday"}),
    }
    for name, (payload, headers) in cases.items():
        response = post(rig, payload, headers)
        assert response.status_code == 401, (name, response.status_code, response.text)
        assert SID not in response.text
    nothing_happened(rig)

    # The same request, correctly signed and fresh, does act: the refusals above were
    # the signature check, not something else about the request.
    ok = post(rig, body, sign(SIGNING_SECRET, body))
    assert ok.status_code == 200
    assert "Subscribed" in json.dumps(rig.slack.wait_for_response("forged"))
    assert rig.query("SELECT count(*) FROM subscriptions") == [(1,)]


# --- bodies that never finish ----------------------------------------------------------------

MIB = 1 << 20
STALLED = 60  # connections: the bound below is the 50 MB for 200, pro rata
READ_TIMEOUT = 2.0  # BODY_READ_TIMEOUT_SECONDS for the test's bot


def test_the_body_budget_keeps_a_quarter_for_small_bodies() -> None:
    budget = BodyBudget(4 * MIB, MIB)
    assert [budget.take(MIB) for _ in range(4)] == [True, True, True, False]
    assert all(budget.take(SMALL_BODY_BYTES) for _ in range(MIB // SMALL_BODY_BYTES))
    assert not budget.take(1)  # full
    budget.give_back(MIB)
    assert not budget.take(MIB)  # a large body may not take the last quarter
    assert budget.take(SMALL_BODY_BYTES)
    assert BodyBudget(MIB // 2, MIB).take(MIB)  # the largest allowed fits alone


def _gate_request(body: bytes, headers: dict[str, str], *, stall: bool) -> Request:
    """A request whose body arrives at once, or all but its last byte and then nothing."""
    sent = body[:-1] if stall else body
    pieces = [sent[i : i + 65536] for i in range(0, len(sent), 65536)]

    async def receive() -> dict[str, Any]:
        if pieces:
            return {"type": "http.request", "body": pieces.pop(0), "more_body": True}
        if stall:
            await asyncio.Event().wait()
        return {"type": "http.request", "body": b"", "more_body": False}

    raw = headers | {"Content-Length": str(len(body))}
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/slack/events",
        "headers": [(k.lower().encode(), v.encode()) for k, v in raw.items()],
    }
    return Request(scope, receive)


def test_the_gate_cuts_off_slow_bodies_and_refuses_bodies_over_budget() -> None:
    budget = BodyBudget(4 * MIB, MIB)
    gate = SlackRequestGate(SecretStr(SIGNING_SECRET), MIB, budget=budget, read_timeout=0.3)
    big = b"x" * MIB
    forged = sign("not-the-signing-secret", big)
    command = slash_command_body("help", response_url="https://hooks.example/x").encode()

    async def go() -> None:
        started = time.monotonic()
        stalled = [
            asyncio.create_task(gate.verified_body(_gate_request(big, forged, stall=True)))
            for _ in range(3)
        ]
        await asyncio.sleep(0.05)
        assert budget.held == 3 * MIB
        over = await gate.verified_body(_gate_request(big, forged, stall=False))
        assert isinstance(over, Response) and over.status_code == 503
        assert over.headers["connection"] == "close"
        # A signed command still gets through, while the large bodies hold their share.
        signed = _gate_request(command, sign(SIGNING_SECRET, command), stall=False)
        assert await gate.verified_body(signed) == command
        for answer in await asyncio.gather(*stalled):
            assert isinstance(answer, Response) and answer.status_code == 408
            assert answer.headers["connection"] == "close"
        assert 0.3 <= time.monotonic() - started < 2.0
        assert budget.held == 0

    asyncio.run(go())


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def stall_body(url: str, headers: dict[str, str], wait: float) -> float | None:
    """Declare a 1 MiB body, send all of it but the last byte, and stop. Returns
    the seconds from connecting until the server answered or hung up, or None if
    it still held the connection open after `wait` seconds."""
    parts = urlsplit(url)
    started = time.monotonic()
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    head = (
        f"POST /slack/events HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        + f"Content-Length: {MIB}\r\n\r\n"
    )
    try:
        writer.write(head.encode() + b"x" * (MIB - 1))
        try:
            await asyncio.wait_for(writer.drain(), wait)
            await asyncio.wait_for(reader.read(), wait - (time.monotonic() - started))
        except (ConnectionError, BrokenPipeError):
            pass  # hung up on: closed
        except TimeoutError:
            return None
        return time.monotonic() - started
    finally:
        writer.transport.abort()


@BACKEND_FREE
def test_bodies_that_stop_short_are_cut_off_and_bounded(
    start_bot: BotFactory, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Memory is measured from a cold start, as the benchmark measures it: a bot
    # forked from the tests' fork server begins with a heap laid out by the
    # server's imports, and its growth under load is not the same figure.
    monkeypatch.setenv("RLBOT_TEST_COLD_START", "1")
    bot = start_bot(BODY_READ_TIMEOUT_SECONDS=str(READ_TIMEOUT))
    # Bolt asks Slack's auth.test on its first request: not during the attack.
    assert bot.command("help", response_url=slack.response_url("warm-up")).status_code == 200
    forged = sign("not-the-signing-secret", b"x" * MIB)
    wait = READ_TIMEOUT + 3.0

    async def warm_up() -> list[float | None]:
        return list(await asyncio.gather(*(stall_body(bot.url, forged, wait) for _ in range(2))))

    # The first cut-off body imports and allocates what every later one reuses (the
    # 408's code path, its log line): not what holding bodies costs.
    assert None not in asyncio.run(warm_up())
    peak = start = rss_mb(bot.proc.pid)

    async def attack() -> tuple[list[float | None], float]:
        nonlocal peak
        stalls = [asyncio.create_task(stall_body(bot.url, forged, wait)) for _ in range(STALLED)]
        await asyncio.sleep(0.5)  # every body sent and stalled by now
        asked = time.monotonic()
        ack = await asyncio.to_thread(
            bot.command, "help", response_url=slack.response_url("during")
        )
        acked = time.monotonic() - asked
        assert ack.status_code == 200 and "rl-bot usage" in ack.text, ack.text[:200]
        while not all(s.done() for s in stalls):
            peak = max(peak, rss_mb(bot.proc.pid))
            await asyncio.sleep(0.02)
        return [s.result() for s in stalls], acked

    closed, acked = asyncio.run(attack())
    grew = peak - start
    still_open = sum(c is None for c in closed)
    print(
        f"{STALLED} stalled 1 MiB bodies: {still_open} still open after {wait:.0f}s; "
        f"slowest closed at {max((c for c in closed if c is not None), default=0):.1f}s; "
        f"peak RSS +{grew:.1f} MB; a signed command acked in {acked:.2f}s"
    )
    assert still_open == 0, f"{still_open} of {STALLED} connections still open after {wait}s"
    assert grew <= 50 * STALLED / 200, f"RSS grew {grew:.1f} MB"
    assert acked < 2.0
    assert httpx.get(f"{bot.url}/healthz").status_code == 200


# --- session ids and names ---------------------------------------------------------------------

#: words that could be a display name (any printable word of at most 200 characters):
#: looked up in one read of Together's list, never put into a request's path or query
NAME_LIKE = [
    "../../etc/passwd",
    "..",
    ".",
    "a/b",
    "/v1/rl/training-sessions",
    "abc%2Fdef",
    "%2e%2e%2f",
    "%2E%2E",
    "abc%00",
    "a%20b",
    "abc?x=1",
    "abc#frag",
    "abc;x=1",
    "a\\b",
    "a" * 129,
    "ｓｅｓｓｉｏｎ",
    "café",
    "\u0430bc",  # Cyrillic a
    "١٢٣",
    "a\u200bb",  # zero-width space: not split as whitespace
    "😀",
    "-abc",
    "_abc",
]
#: neither an id nor a name: refused in the ack, nothing reaches Together
BAD_IDS = [
    "x" * 5000,
    "a" * 201,
    "abc\x00def",
    "a\x7fb",
    "<@U0123ABC>",
    "<https://evil.example|x>",
    "<!channel>",
]
# Whitespace inside an id splits it into words: refused as a malformed command.
SPLIT_IDS = ["abc def", "abc\tdef", "abc\u00a0def", "123e4567 e89b"]


@BACKEND_FREE
def test_bad_session_ids_are_refused_in_the_ack_and_never_reach_together(fresh: Rig) -> None:
    rig = fresh
    for verb in ("", "show ", "subscribe ", "unsubscribe "):
        for bad in BAD_IDS:
            response = rig.bot.command(verb + bad, response_url=rig.slack.response_url("x"))
            assert response.status_code == 200
            body = response.json()
            assert body["response_type"] == "ephemeral", (verb, bad)
            assert NOT_AN_ID in body["text"], (verb, bad, body["text"])
        for split in SPLIT_IDS:
            body = rig.bot.command(verb + split, response_url=rig.slack.response_url("x")).json()
            assert body["response_type"] == "ephemeral", (verb, split)
            assert NOT_AN_ID in body["text"] or "/rl-session" in json.dumps(body), body
    nothing_happened(rig)


@BACKEND_FREE
def test_a_word_that_may_be_a_name_never_reaches_together_in_a_url(fresh: Rig) -> None:
    """Only an id-shaped word is ever asked for by id; any other word is looked up
    in Together's list, whose request carries nothing of it."""
    rig = fresh
    for verb in ("", "subscribe ", "unsubscribe "):
        for word in NAME_LIKE if verb in ("", "subscribe ") else NAME_LIKE[::4]:
            token = uuid.uuid4().hex
            rig.bot.command(verb + word, response_url=rig.slack.response_url(token))
            answer = rig.slack.wait_for_response(token)
            assert answer["response_type"] == "ephemeral", (verb, word)
            assert "No session named" in answer["text"], (verb, word, answer["text"])
    paths = set(rig.together.paths)
    assert paths <= {"/v1/rl/training-sessions?limit=100"} | {
        f"/v1/rl/training-sessions/{w}" for w in NAME_LIKE if is_session_id(w)
    }, paths
    assert said(rig.slack) == []
    for table in ("subscriptions", "watched_sessions", "outbox"):
        assert rig.query(f"SELECT count(*) FROM {table}") == [(0,)], table


# --- interactive payloads -----------------------------------------------------------------------


def click(rig: Rig, value: str, action: str = "rl_subscribe", **kwargs: Any) -> dict[str, Any]:
    token = uuid.uuid4().hex
    response = rig.bot.click(action, value, response_url=rig.slack.response_url(token), **kwargs)
    assert response.status_code == 200
    return rig.slack.wait_for_response(token)


def raw_click(rig: Rig, payload: dict[str, Any]) -> httpx.Response:
    return rig.bot.post(urlencode({"payload": json.dumps(payload)}))


@BACKEND_FREE
@pytest.mark.parametrize("action", ["rl_subscribe", "rl_unsubscribe", "rl_refresh"])
def test_tampered_button_values_are_refused(fresh: Rig, action: str) -> None:
    rig = fresh
    for value in (
        "../../x",
        json.dumps({"session_id": SID, "channel": "CEVIL0001"}),
        f"{SID}/../../admin",
        f"{SID}%2F..",
        "",
        "a" * 200,
    ):
        answer = click(rig, value, action)
        assert answer["response_type"] == "ephemeral"
        assert NOT_AN_ID in answer["text"], (value, answer)
    assert rig.together.total_requests == 0
    assert said(rig.slack) == []
    assert rig.query("SELECT count(*) FROM subscriptions") == [(0,)]


@BACKEND_FREE
def test_a_button_value_naming_a_channel_is_just_an_unknown_session(fresh: Rig) -> None:
    rig = fresh
    answer = click(rig, "CEVIL0001", channel_id="C1")
    assert "no training session" in answer["text"]
    assert rig.together.paths == ["/v1/rl/training-sessions/CEVIL0001"]
    assert said(rig.slack) == []
    assert rig.query("SELECT count(*) FROM subscriptions") == [(0,)]


DROP = object()


@BACKEND_FREE
@pytest.mark.parametrize(
    "changes",
    [
        {"channel": DROP},
        {"user": DROP},
        {"channel": DROP, "user": DROP, "team": DROP},
        {"user": None, "team": None},  # present but null
        {"channel": "C123", "user": "U123"},  # strings where Slack sends objects
    ],
)
def test_clicks_without_channel_or_user_store_nothing(fresh: Rig, changes: dict[str, Any]) -> None:
    rig = fresh
    rig.together.add(SID)
    token = uuid.uuid4().hex
    payload = json.loads(_payload("rl_subscribe", SID, rig.slack.response_url(token)))
    payload["container"].pop("channel_id")
    for key, value in changes.items():
        if value is DROP:
            payload.pop(key)
        else:
            payload[key] = value
    assert raw_click(rig, payload).status_code == 200
    answer = rig.slack.wait_for_response(token)
    assert answer["response_type"] == "ephemeral"
    assert "could not tell where that click came from" in answer["text"]
    assert rig.together.total_requests == 0
    assert said(rig.slack) == []
    assert rig.query("SELECT count(*) FROM subscriptions") == [(0,)]


def _payload(action: str, value: str, response_url: str, **kwargs: Any) -> str:
    body = block_action_body(action, value, response_url=response_url, **kwargs)
    return parse_qs(body)["payload"][0]


@BACKEND_FREE
def test_the_channel_acted_on_is_the_one_slack_says(fresh: Rig) -> None:
    rig = fresh
    rig.together.add(SID)
    token = uuid.uuid4().hex
    payload = json.loads(
        _payload(
            "rl_subscribe",
            SID,
            rig.slack.response_url(token),
            channel_id="C1",
            is_ephemeral=True,
        )
    )
    # Everything but payload["channel"] names another channel.
    payload["container"]["channel_id"] = "CEVIL0001"
    payload["actions"][0]["block_id"] = "CEVIL0001"
    payload["view"] = {"private_metadata": json.dumps({"channel": "CEVIL0001"})}
    assert raw_click(rig, payload).status_code == 200
    assert "subscribed this channel" in rig.slack.wait_for_response(token)["text"]
    rows = rig.query("SELECT channel_id, session_id FROM subscriptions")
    assert rows == [("C1", SID)]
    channels = {c.channel for c in rig.slack.calls if c.channel}
    assert channels == {"C1"}, channels

    # Unsubscribing from another channel cannot end C1's subscription.
    answer = click(rig, SID, "rl_unsubscribe", channel_id="C2")
    assert "not subscribed" in answer["text"]
    assert rig.query("SELECT channel_id, active FROM subscriptions") == [("C1", True)]
    assert {c.channel for c in rig.slack.calls if c.channel} == {"C1"}


# --- allowlists ----------------------------------------------------------------------------------


@BACKEND_FREE
def test_allowlists_refuse_other_workspaces_and_channels(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    bot = start_bot(ALLOWED_TEAM_IDS="T1, T3", ALLOWED_CHANNEL_IDS="C123,C1")
    together.add(SID)
    url = slack.response_url("refused")
    for text in (SID, f"subscribe {SID}", "list", "help"):
        body = bot.command(text, response_url=url, team_id="T2").json()
        assert body == {"response_type": "ephemeral", "text": body["text"]}
        assert "not enabled for this workspace" in body["text"]
        body = bot.command(text, response_url=url, channel_id="C999").json()
        assert "not enabled in this channel" in body["text"]
        assert body["response_type"] == "ephemeral"
    other_team = bot.click("rl_subscribe", SID, response_url=url, team_id="T2", channel_id="C1")
    other_channel = bot.click("rl_subscribe", SID, response_url=url, channel_id="C999")
    assert other_team.status_code == other_channel.status_code == 200
    time.sleep(0.5)
    assert together.total_requests == 0
    assert said(slack) == [] and slack.response_attempts == []
    assert query(db_url, "SELECT count(*) FROM subscriptions") == [(0,)]

    # Allowed team and channel: served as usual.
    for team, channel in (("T1", "C123"), ("T3", "C1")):
        token = f"ok-{team}"
        bot.command(SID, response_url=slack.response_url(token), team_id=team, channel_id=channel)
        assert slack.wait_for_response(token)["response_type"] == "in_channel"


# --- secrets ---------------------------------------------------------------------------------------


def test_no_secret_in_any_output_of_a_busy_run(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    bot = start_bot(LOG_LEVEL="DEBUG", ONCALL_CHANNEL="COPS", LOG_FORMAT="console")
    secrets = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET}
    secrets["TOGETHER_API_KEY"] = together.api_key
    assert all(bot.env[name] == value for name, value in secrets.items())
    rejected, broken = "key-rejected-1", "broken-500-1"
    together.add(SID)
    together.fail(rejected, status=401)
    together.fail(broken, status=500)

    bot.command(SID, response_url=slack.response_url("show"))
    slack.wait_for_response("show")
    bot.command(f"subscribe {SID}", response_url=slack.response_url("sub"))
    slack.wait_for_response("sub")
    [root] = [c.ts for c in slack.successful_posts("C123")]
    bot.command(rejected, response_url=slack.response_url("401"))
    bot.command(broken, response_url=slack.response_url("500"))
    slack.wait_for_response("401")
    slack.wait_for_response("500", timeout=15)
    bot.post(slash_command_body("list", response_url=slack.response_url("forged")), secret="x")
    slack.expire_response_url("expired")
    bot.command(rejected, response_url=slack.response_url("expired"))  # falls back to the API
    slack.wait_for_calls("chat.postEphemeral")

    together.set_status(SID, "STOPPING")
    wait_until(lambda: slack.posts_in_thread("C123", root), what="transition told")
    slack.set_channel_error("C123", "invalid_auth")
    together.set_status(SID, "STOPPED")
    wait_until(lambda: "CRITICAL" in bot.log(), what="invalid_auth logged")
    together.fail(None, status=401)
    together.add("second-session-1")
    bot.command("subscribe second-session-1", response_url=slack.response_url("sub2"))
    time.sleep(1.5)
    bot.stop()

    log = bot.log()
    assert " DEBUG " in log  # the scan covered the most talkative level
    assert "Slack rejected the bot token" in log
    assert "Together rejected the API key" in log
    slack_texts = [
        json.dumps({"params": c.params, "response": c.response}, default=str) for c in slack.calls
    ]
    slack_texts += [json.dumps(a.body, default=str) for a in slack.response_attempts]
    assert len(slack_texts) > 8
    for name, secret in secrets.items():
        assert secret not in log, f"{name} in the bot's output"
        for text in slack_texts:
            assert secret not in text, f"{name} in a Slack message: {text[:300]}"
        assert not any(secret in p for p in together.paths), name

    # The Together key went only to Together, as a bearer token; Slack only saw the bot token.
    assert together.auth_headers and set(together.auth_headers) == {f"Bearer {together.api_key}"}
    for call in slack.calls:
        headers = json.dumps(dict(call.headers))
        assert together.api_key not in headers, call.method
        assert call.token == BOT_TOKEN, call.method


# --- start-up configuration ----------------------------------------------------------------------

CONFIG_SECRETS = {
    "SLACK_BOT_TOKEN": "xoxb-config-test-token-4242",
    "SLACK_SIGNING_SECRET": "config-test-signing-secret-4242",
    "TOGETHER_API_KEY": "config-test-together-key-4242",
}


EXTRA_SECRETS = ["appleveltokensecret", "not-a-token-secretvalue", "db-password-4242"]


def run_serve(tmp_path: Path, **env: str | None) -> subprocess.CompletedProcess[str]:
    full = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    full |= CONFIG_SECRETS | {"DATABASE_URL": f"sqlite:///{tmp_path}/rl-bot.db"}
    for key, value in env.items():
        if value is None:
            full.pop(key, None)
        else:
            full[key] = value
    return subprocess.run(
        [sys.executable, "-m", "bot", "serve", "--port", "1"],
        cwd=tmp_path,  # no .env here
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow  # runs rl-bot as a subprocess
@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"SLACK_BOT_TOKEN": "xapp-1-A111-222-appleveltokensecret"}, "SLACK_BOT_TOKEN"),
        ({"SLACK_BOT_TOKEN": "not-a-token-secretvalue"}, "SLACK_BOT_TOKEN"),
        ({"SLACK_BOT_TOKEN": None}, "SLACK_BOT_TOKEN"),
        ({"SLACK_SIGNING_SECRET": None}, "SLACK_SIGNING_SECRET"),
        ({"TOGETHER_API_KEY": None}, "TOGETHER_API_KEY"),
        ({"DATABASE_URL": "mysql://x"}, "DATABASE_URL"),
        ({"DATABASE_URL": "mysql://admin:db-password-4242@db.internal/rl"}, "DATABASE_URL"),
        ({"TOGETHER_BASE_URL": "ftp://api.together.ai/v1"}, "TOGETHER_BASE_URL"),
    ],
)
def test_bad_configuration_exits_2_with_one_line_and_no_secret(
    tmp_path: Path, env: dict[str, str | None], named: str
) -> None:
    result = run_serve(tmp_path, **env)
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert named in lines[0] and lines[0].startswith("rl-bot:")
    output = result.stdout + result.stderr
    for secret in [*CONFIG_SECRETS.values(), *EXTRA_SECRETS]:
        assert secret not in output, secret
    assert not (tmp_path / "rl-bot.db").exists()  # stopped before touching anything
