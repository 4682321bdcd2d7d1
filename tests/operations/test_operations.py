"""Operations: /metrics after real traffic, JSON logs, health and readiness,
`rl-bot show`, `rl-bot migrate`, start-up checks of Socket Mode settings, and the
Slack manifest (the container and compose files: test_container.py).

Everything that runs the bot runs a real `python -m bot` process against the fake
Slack and Together servers on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.simulated import FakeSlack, FakeTogether
from tests.support import REPO, BotFactory, BotProcess, free_tcp_port, query, wait_until

SID = "123e4567-e89b-12d3-a456-426614174000"
OTHER = "abcdef12-0000-4000-8000-000000000001"
OPS = "COPS"
APP_TOKEN = "xapp-1-A1-1234567890-apptokensecret"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


# --- helpers ---------------------------------------------------------------------------------


def scrape(bot: BotProcess) -> Samples:
    response = httpx.get(f"{bot.url}/metrics", timeout=5)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = float(s.value)
    return samples


def scrape_until(
    bot: BotProcess, ok: Callable[[Samples], bool], *, timeout: float = 30.0, what: str
) -> Samples:
    """Scrape until `ok(samples)`; returns that scrape."""
    found: list[Samples] = []

    def check() -> bool:
        samples = scrape(bot)
        if ok(samples):
            found.append(samples)
            return True
        return False

    wait_until(check, timeout=timeout, what=what)
    return found[-1]


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over every label set that includes `labels`."""
    want = set(labels.items())
    return sum(v for (n, lbl), v in samples.items() if n == name and want <= set(lbl))


def run_bot(
    args: list[str], cwd: Path, env: dict[str, str | None], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`python -m bot <args>` with only the given settings (no .env in `cwd`)."""
    full = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(cwd),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
    }
    full |= {k: v for k, v in env.items() if v is not None}
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def subscribe(bot: BotProcess, slack: FakeSlack, sid: str, channel: str) -> None:
    token = f"sub-{channel}"
    r = bot.command(f"subscribe {sid}", response_url=slack.response_url(token), channel_id=channel)
    assert r.status_code == 200
    assert "Subscribed" in str(slack.wait_for_response(token))


# --- /metrics ---------------------------------------------------------------------------------


@pytest.mark.backend_independent("the metrics; /readyz's database check runs on both")
def test_metrics_move_after_real_traffic(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    bot = start_bot(ONCALL_CHANNEL=OPS)
    before = scrape(bot)
    together.add(SID, display_name="alpha-run")
    together.add(OTHER, display_name="beta-run")

    assert bot.command(SID, response_url=slack.response_url("show")).status_code == 200
    slack.wait_for_response("show")
    assert "/rl-session" in bot.command("help", response_url=slack.response_url("h")).text
    bad = bot.command("<!channel>", response_url=slack.response_url("bad"))
    assert "not a session id" in bad.text
    subscribe(bot, slack, SID, "C1")
    subscribe(bot, slack, OTHER, "C2")

    together.set_status(SID, "ERROR")  # a poll sees it, a reply and an on-call alert go out
    wait_until(lambda: slack.successful_posts(OPS), what="on-call alert")
    after = scrape_until(
        bot,
        lambda m: (
            value(m, "rlbot_oncall_alerts_total") >= 1
            and value(m, "rlbot_delivery_attempts_total", outcome="sent") >= 2
        ),
        what="delivery counted",
    )

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("rlbot_commands_total", verb="show", outcome="ok") == 1
    assert moved("rlbot_commands_total", verb="help", outcome="usage") == 1
    assert moved("rlbot_commands_total", verb="show", outcome="invalid") == 1
    assert moved("rlbot_commands_total", verb="subscribe", outcome="ok") == 2
    assert moved("rlbot_ack_seconds_count") == 5  # one per signed request
    assert moved("rlbot_ack_seconds_bucket", le="3.0") == 5  # all inside Slack's 3 s
    # show + two subscribes + at least one poll, all answered 200
    assert moved("rlbot_together_requests_total", status="200") >= 4
    assert moved("rlbot_together_request_seconds_count") >= 4
    assert moved("rlbot_poll_cycle_seconds_count") >= 1
    assert moved("rlbot_poll_sessions_total") >= 1
    assert moved("rlbot_delivery_attempts_total", outcome="sent") >= 2  # reply + alert
    assert moved("rlbot_oncall_alerts_total") == 1
    assert value(after, "rlbot_delivery_attempts_total", outcome="dead") == 0
    transitions = {
        dict(labels)["to_status"]: v
        for (name, labels), v in after.items()
        if name == "rlbot_transitions_total"
    }
    assert [status for status, n in transitions.items() if n >= 1 and "ERROR" in status]

    # A delivery Slack keeps refusing with 500s stays in the outbox, counted as retries.
    slack.fail_next("chat.postMessage", status=500, times=10_000)
    together.set_status(OTHER, "STOPPING")
    wait_until(
        lambda: value(scrape(bot), "rlbot_delivery_attempts_total", outcome="retry") >= 1,
        what="a retried delivery",
    )
    pending = query(db_url, "SELECT count(*) FROM outbox WHERE state = 'pending'")[0][0]
    assert pending >= 1

    # The gauges are computed from the database by a job (every 15 s, and at start): a
    # replica started now reports them at once. SID's subscription ended with its ERROR.
    if db_url.startswith("sqlite"):
        bot.terminate()  # one rl-bot process per SQLite file
    replica = start_bot()
    gauges = scrape_until(
        replica,
        lambda m: (
            value(m, "rlbot_subscriptions_active") == 1 and value(m, "rlbot_outbox_depth") >= 1
        ),
        timeout=10,
        what="gauges from the database",
    )
    active = query(db_url, "SELECT count(*) FROM subscriptions WHERE active")[0][0]
    assert value(gauges, "rlbot_subscriptions_active") == active == 1
    slack.clear_failures()


# --- logs ---------------------------------------------------------------------------------------


def _show_once(bot: BotProcess, slack: FakeSlack, together: FakeTogether) -> None:
    together.add(SID)
    assert bot.command(SID, response_url=slack.response_url("log")).status_code == 200
    slack.wait_for_response("log")
    bot.stop()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # nothing backend-specific
def test_json_logs_are_one_object_per_line_with_ids(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    bot = start_bot(LOG_FORMAT="json")
    # uvicorn says something (at WARNING: its INFO start-up lines are left out).
    host, port = bot.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        raw.sendall(b"NOT HTTP\r\n\r\n")
        raw.recv(1024)
    wait_until(lambda: "uvicorn.error" in bot.log(), timeout=10, what="uvicorn's warning")
    _show_once(bot, slack, together)
    lines = [line for line in bot.log().splitlines() if line.strip()]
    assert len(lines) >= 3
    records = []
    for line in lines:
        record = json.loads(line)  # every line, uvicorn's and alembic's included
        assert isinstance(record, dict)
        assert {"ts", "level", "logger", "msg"} <= record.keys(), record
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["ts"]), record
        records.append(record)
    # No terminal colour codes (uvicorn attaches a `color_message` to its records).
    assert "\x1b" not in bot.log() and "\\u001b" not in bot.log()
    [command] = [r for r in records if r["msg"].startswith("command show")]
    assert command["channel_id"] == "C123" and command["session_id"] == SID
    assert command["level"] == "INFO" and command["logger"].startswith("bot.")
    assert {r["logger"] for r in records} >= {"uvicorn.error", "bot.slack.web"}


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_console_logs_are_not_json(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    bot = start_bot(LOG_FORMAT="console")
    _show_once(bot, slack, together)
    lines = [line for line in bot.log().splitlines() if line.strip()]
    assert lines
    for line in lines:
        with pytest.raises(ValueError):
            json.loads(line)
    [command] = [line for line in lines if "command show" in line]
    assert " INFO " in command and f"session_id={SID}" in command and "channel_id=C123" in command


# --- health and readiness -----------------------------------------------------------------------


def test_healthz_and_readyz(start_bot: BotFactory, slack: FakeSlack, db_url: str) -> None:
    # Slack's answer is normally reused for a minute (tests/process/test_resources_edges.py);
    # with the cache off each probe asks, so a change shows at once.
    bot = start_bot(READYZ_SLACK_CACHE_SECONDS="0")
    health = httpx.get(f"{bot.url}/healthz")
    assert (health.status_code, health.json()) == (200, {"ok": True})
    ready = httpx.get(f"{bot.url}/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {
        "ok": True,
        "checks": {"database": "ok", "migrations": "ok", "slack": "ok", "together": "ok"},
    }

    # Slack no longer accepts the token: not ready, but alive.
    slack.fail_next("auth.test", error="invalid_auth")
    ready = httpx.get(f"{bot.url}/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"] == {
        "database": "ok",
        "migrations": "ok",
        "slack": "invalid_auth",
        "together": "ok",
    }
    assert httpx.get(f"{bot.url}/healthz").status_code == 200
    assert httpx.get(f"{bot.url}/readyz").status_code == 200  # it asks Slack each time

    # A schema behind this version's head: not ready, and says where it is.
    query(db_url, "UPDATE alembic_version SET version_num = '0001'")
    ready = httpx.get(f"{bot.url}/readyz")
    assert ready.status_code == 503
    checks = ready.json()["checks"]
    assert checks["database"] == "ok" and checks["migrations"].startswith("at 0001, head is ")


# --- rl-bot show --------------------------------------------------------------------------------


def _show(
    tmp_path: Path, together: FakeTogether, *args: str, key: str | None = None
) -> subprocess.CompletedProcess[str]:
    return run_bot(
        ["show", *args],
        tmp_path,
        {
            "TOGETHER_API_KEY": key or together.api_key,
            "TOGETHER_BASE_URL": together.base_url,
            "TOGETHER_TIMEOUT_SECONDS": "2",
            "LOG_LEVEL": "WARNING",
        },
    )


@pytest.mark.slow  # runs rl-bot as a subprocess
def test_show_prints_the_card_in_the_terminal(tmp_path: Path, together: FakeTogether) -> None:
    together.add(SID, display_name="gsm8k-experiment-2")
    text = _show(tmp_path, together, SID)  # no Slack setting at all
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert "gsm8k-experiment-2" in out and SID in out
    assert "Status: " in out and "Running" in out
    assert "Qwen/Qwen3.5-4B" in out
    assert '"blocks"' not in out and "*Status*" not in out  # text, not Block Kit or mrkdwn

    as_json = _show(tmp_path, together, SID, "--json")
    assert as_json.returncode == 0, as_json.stderr
    card = json.loads(as_json.stdout)
    assert isinstance(card["blocks"], list) and card["blocks"]
    assert card["blocks"][0]["type"] == "header"
    assert "gsm8k-experiment-2" in card["blocks"][0]["text"]["text"]
    assert together.requests_for(SID) == 2
    assert not (tmp_path / "rl-bot.db").exists()  # show needs no database


@pytest.mark.slow  # runs rl-bot as a subprocess
def test_show_errors_exit_1_with_one_clear_line(tmp_path: Path, together: FakeTogether) -> None:
    unknown = _show(tmp_path, together, OTHER)
    assert unknown.returncode == 1
    assert unknown.stdout == ""
    assert unknown.stderr.strip() == "rl-bot: Together has no training session with that id."

    before = together.total_requests
    bad = _show(tmp_path, together, "../../v1/admin")
    assert bad.returncode == 1
    assert bad.stderr.startswith("rl-bot: That is not a session id.")
    assert together.total_requests == before  # refused before any request

    wrong_key = "wrong-together-key-0123456789"
    rejected = _show(tmp_path, together, SID, key=wrong_key)
    assert rejected.returncode == 1
    assert rejected.stderr == "rl-bot: Together refused TOGETHER_API_KEY (HTTP 401)\n"
    assert wrong_key not in rejected.stdout + rejected.stderr


@pytest.mark.slow  # runs rl-bot as a subprocess
@pytest.mark.parametrize(
    ("host", "says"),
    [
        ("rl-bot-test.invalid", "cannot resolve Together's host name"),
        ("127.0.0.1:{port}", "Together refused the connection"),
    ],
    ids=["no-such-host", "nothing-listening"],
)
def test_show_says_what_failed_in_a_terminals_words(
    tmp_path: Path, together: FakeTogether, host: str, says: str
) -> None:
    """A name that does not resolve is not a slow server, and a terminal has no operators."""
    base_url = f"http://{host.format(port=free_tcp_port())}/v1"
    result = run_bot(
        ["show", SID],
        tmp_path,
        {"TOGETHER_API_KEY": together.api_key, "TOGETHER_BASE_URL": base_url},
    )
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"rl-bot: {says}"), line
    assert "in time" not in line and "operators" not in line


# --- configuration checked at start --------------------------------------------------------------
# (HTTP-mode checks are in test_security.py; these are Socket Mode's own.)


@pytest.mark.slow  # runs rl-bot as a subprocess
@pytest.mark.parametrize(
    ("env", "named", "says"),
    [
        ({"SLACK_APP_TOKEN": None}, "SLACK_APP_TOKEN", "not set"),
        ({"SLACK_APP_TOKEN": "xoxb-1-wrongkind-apptokensecret"}, "SLACK_APP_TOKEN", "xapp-"),
        ({"SLACK_BOT_TOKEN": APP_TOKEN}, "SLACK_BOT_TOKEN", "xoxb-"),
    ],
)
def test_socket_mode_config_errors_exit_2_with_one_line(
    tmp_path: Path, env: dict[str, str | None], named: str, says: str
) -> None:
    settings: dict[str, str | None] = {
        "SLACK_BOT_TOKEN": "xoxb-1-socket-bottokensecret",
        "SLACK_APP_TOKEN": APP_TOKEN,
        "TOGETHER_API_KEY": "together-key-secret-0123",
        "DATABASE_URL": f"sqlite:///{tmp_path}/rl-bot.db",
        **env,
    }
    result = run_bot(["socket", "--port", "1"], tmp_path, settings)
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("rl-bot:") and named in lines[0] and says in lines[0]
    for secret in ("apptokensecret", "bottokensecret", "together-key-secret"):
        assert secret not in result.stdout + result.stderr
    assert not (tmp_path / "rl-bot.db").exists()  # stopped before touching anything


# --- migrations ---------------------------------------------------------------------------------


@pytest.mark.slow  # runs rl-bot as a subprocess
def test_migrate_brings_a_fresh_sqlite_file_to_head(tmp_path: Path) -> None:
    """One line per script applied, then one line saying there was nothing to apply:
    none of Alembic's own log lines, in either log format."""
    from bot.store.migrations import head_revision, scripts_dir

    url = f"sqlite:///{tmp_path}/fresh.db"
    first = run_bot(["migrate"], tmp_path, {"DATABASE_URL": url, "LOG_FORMAT": "json"})
    assert first.returncode == 0, first.stderr
    scripts = sorted(p.name.split("_", 1)[0] for p in (scripts_dir() / "versions").glob("*.py"))
    lines = (first.stdout + first.stderr).splitlines()
    assert [line.split(":", 2)[1].split()[-1] for line in lines] == scripts, lines
    assert all(line.startswith("rl-bot: applied migration ") for line in lines), lines
    head = head_revision(url)
    assert head and query(url, "SELECT version_num FROM alembic_version") == [(head,)]
    tables = {r[0] for r in query(url, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"subscriptions", "watched_sessions", "outbox"} <= tables
    again = run_bot(["migrate"], tmp_path, {"DATABASE_URL": url})  # idempotent
    assert again.returncode == 0, again.stderr
    assert (again.stdout + again.stderr).splitlines() == [
        f"rl-bot: the database was already at the latest schema ({head}); nothing to apply"
    ]
    assert query(url, "SELECT version_num FROM alembic_version") == [(head,)]


@pytest.mark.slow  # runs rl-bot as a subprocess
def test_serve_migrates_the_default_sqlite_database_itself(
    tmp_path: Path, slack: FakeSlack, together: FakeTogether
) -> None:
    """The two-command quick start: no `rl-bot migrate` before `rl-bot serve` on SQLite."""
    from bot.store.migrations import head_revision

    url = f"sqlite:///{tmp_path}/quickstart.db"
    bot = BotProcess.start(workdir=tmp_path, db_url=url, slack=slack, together=together)
    try:
        ready = httpx.get(f"{bot.url}/readyz")
        assert ready.status_code == 200, ready.text
        assert query(url, "SELECT version_num FROM alembic_version") == [(head_revision(url),)]
    finally:
        bot.stop()


@pytest.mark.slow  # runs python as a subprocess
def test_the_running_bot_compares_revisions_without_alembic(tmp_path: Path) -> None:
    """The head read from the scripts and the revision read from the database are
    Alembic's own, and nothing the serving process imports pulls Alembic in."""
    import asyncio

    from alembic.runtime.migration import MigrationContext

    from bot.store.engine import make_engine
    from bot.store.migrations import _alembic_head, _scripts_head, current_revision, upgrade

    url = f"sqlite:///{tmp_path}/revisions.db"
    assert _scripts_head() is not None and _scripts_head() == _alembic_head(url)

    async def both() -> tuple[str | None, str | None]:
        engine = make_engine(url)
        try:
            async with engine.connect() as conn:
                theirs = await conn.run_sync(
                    lambda c: MigrationContext.configure(c).get_current_revision()
                )
        finally:
            await engine.dispose()
        return await current_revision(url), theirs

    assert asyncio.run(both()) == (None, None)  # an empty database
    upgrade(url)
    assert asyncio.run(both()) == (_scripts_head(), _scripts_head())
    imports = (
        "import sys, bot.cli, bot.slack.web, bot.runtime, bot.slack.app, bot.jobs.ticker; "
        "print(sorted(m for m in ('alembic', 'mako') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", imports], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout


# --- manifest (the container and compose files: test_container.py) ----------------------------


def _yaml(name: str) -> Any:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((REPO / name).read_text())


def test_manifest_declares_the_command_interactivity_and_exactly_the_readme_scopes() -> None:
    manifest = _yaml("manifest.yml")
    [command] = manifest["features"]["slash_commands"]
    assert command["command"] == "/rl-session"
    assert command["url"].endswith("/slack/events")
    interactivity = manifest["settings"]["interactivity"]
    assert interactivity["is_enabled"] is True
    assert interactivity["request_url"].endswith("/slack/events")
    assert isinstance(manifest["settings"]["socket_mode_enabled"], bool)
    assert manifest["features"]["bot_user"]["display_name"]

    readme = (REPO / "README.md").read_text()
    match = re.search(r"^Scopes:(.*?)\.\s", readme, flags=re.MULTILINE | re.DOTALL)
    assert match, "README lists the scopes in a line starting with 'Scopes:'"
    listed = {s for chunk in re.findall(r"`([^`]+)`", match.group(1)) for s in chunk.split("/")}
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert scopes == listed, (
        f"manifest.yml requests {sorted(scopes)} but README's 'Scopes:' line lists {sorted(listed)}"
    )
    assert len(manifest["oauth_config"]["scopes"]["bot"]) == len(listed)  # no duplicates

    # The three values README says to copy into .env are all in .env.example.
    example = (REPO / ".env.example").read_text()
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "TOGETHER_API_KEY", "SLACK_APP_TOKEN"):
        assert re.search(rf"^{name}=", example, flags=re.MULTILINE), name


def test_manifest_usage_hint_lists_every_verb_and_which_take_an_id() -> None:
    from typing import get_args

    from bot.commands.parser import Verb

    [command] = _yaml("manifest.yml")["features"]["slash_commands"]
    groups = [group.split() for group in command["usage_hint"].split(" | ")]
    assert groups[0] == ["<id>"]  # a bare id shows the card
    verbs = {verb: words[1:2] == ["<id>"] for words in groups[1:] for verb in words[0].split("|")}
    assert set(verbs) == set(get_args(Verb)) - {"show"}
    assert {v for v, takes_id in verbs.items() if takes_id} == {
        "subscribe",
        "unsubscribe",
        "mute",
        "unmute",
        "chart",
        "alert",
        "budget",
    }
