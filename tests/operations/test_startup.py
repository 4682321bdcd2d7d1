"""What `rl-bot serve` and `rl-bot socket` check and say as they start.

The Slack token and the Together key are tried once: a secret the service refuses
stops the bot with exit code 2 and one line naming the setting; a service that
cannot be reached lets the bot start, is said once at WARNING, and keeps /readyz
at 503 until a check gets through. The start-up log is short enough to read.

Real `rl-bot` processes against the Slack- and Together-shaped servers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes import FakeSlack, FakeTogether
from tests.support import BOT_TOKEN, BotProcess, free_tcp_port

pytestmark = pytest.mark.slow  # starts rl-bot processes

APP_TOKEN = "xapp-1-A1-1234567890-apptokensecret"
WRONG_KEY = "wrong-together-key-0123456789"


def _start(
    tmp_path: Path,
    slack: FakeSlack,
    together: FakeTogether,
    *,
    command: str = "serve",
    wait: bool = False,
    **env: str,
) -> BotProcess:
    """A bot on a SQLite file that does not exist yet (so a refusal can be seen to
    touch nothing)."""
    extra = {"SLACK_APP_TOKEN": APP_TOKEN} if command == "socket" else {}
    return BotProcess.start(
        workdir=tmp_path,
        db_url=f"sqlite:///{tmp_path}/rl-bot.db",
        slack=slack,
        together=together,
        env=extra | env,
        command=command,
        wait=wait,
        unset=("SLACK_SIGNING_SECRET",) if command == "socket" else (),
    )


def _records(bot: BotProcess) -> list[dict[str, Any]]:
    """The JSON log records (LOG_FORMAT=json), in order."""
    return [json.loads(line) for line in bot.log().splitlines() if line.startswith("{")]


def _refused(bot: BotProcess) -> list[str]:
    assert bot.proc.wait(timeout=30) == 2, bot.log_tail()
    return [line for line in bot.log().splitlines() if line.strip()]


@pytest.mark.parametrize("command", ["serve", "socket"])
def test_a_token_slack_refuses_stops_the_bot_naming_it(
    tmp_path: Path, slack: FakeSlack, together: FakeTogether, command: str
) -> None:
    slack.fail_next("auth.test", error="invalid_auth")
    bot = _start(tmp_path, slack, together, command=command)
    lines = _refused(bot)
    assert lines == ["rl-bot: SLACK_BOT_TOKEN was refused: Slack answered invalid_auth"]
    assert BOT_TOKEN not in bot.log()
    assert not (tmp_path / "rl-bot.db").exists()  # stopped before touching anything


def test_a_key_together_refuses_stops_the_bot_naming_it(
    tmp_path: Path, slack: FakeSlack, together: FakeTogether
) -> None:
    bot = _start(tmp_path, slack, together, TOGETHER_API_KEY=WRONG_KEY)
    lines = _refused(bot)
    assert lines == ["rl-bot: TOGETHER_API_KEY was refused: Together answered HTTP 401"]
    assert WRONG_KEY not in bot.log()
    assert len(together.key_checks) == 1 and together.total_requests == 0
    assert not (tmp_path / "rl-bot.db").exists()


def test_services_out_of_reach_start_the_bot_with_one_warning_and_readyz_503(
    tmp_path: Path, slack: FakeSlack, together: FakeTogether
) -> None:
    # Nothing listens where Slack should be; Together answers its first two checks
    # (at start, and the first /readyz) with a 503, then is back.
    together.fail(None, status=503, route="key_check", times=2)
    bot = _start(
        tmp_path,
        slack,
        together,
        wait=True,
        SLACK_API_URL=f"http://127.0.0.1:{free_tcp_port()}/api/",
        READYZ_SLACK_CACHE_SECONDS="0",
    )
    warnings = [r for r in _records(bot) if r["level"] == "WARNING"]
    assert len(warnings) == 1, warnings
    said = warnings[0]["msg"]
    assert "SLACK_BOT_TOKEN" in said and "TOGETHER_API_KEY" in said and "/readyz" in said
    assert "Slack refused the connection" in said and "Together answered HTTP 503" in said

    ready = httpx.get(f"{bot.url}/readyz", timeout=10)
    assert ready.status_code == 503
    checks = ready.json()["checks"]
    assert checks["database"] == "ok"
    assert checks["slack"].startswith("unreachable")
    assert checks["together"] == "unreachable (Together answered HTTP 503)"

    again = httpx.get(f"{bot.url}/readyz", timeout=10)  # Together is back, Slack is not
    assert again.status_code == 503
    assert again.json()["checks"]["together"] == "ok"
    assert again.json()["checks"]["slack"].startswith("unreachable")
    assert len(together.key_checks) == 3
    bot.stop()


def test_a_clean_start_warns_of_nothing_and_says_ready_within_ten_lines(
    tmp_path: Path, slack: FakeSlack, together: FakeTogether
) -> None:
    """A fresh SQLite file, which the bot migrates itself: the longest start."""
    bot = _start(tmp_path, slack, together, wait=True)
    try:
        records = _records(bot)
        [ready] = [i for i, r in enumerate(records) if r["msg"].startswith("rl-bot ready")]
        before = records[:ready]
        assert len([r for r in before if r["level"] == "INFO"]) <= 10, before
        assert [r for r in before if r["level"] not in ("INFO", "DEBUG")] == []
        assert records[ready]["msg"] == f"rl-bot ready on {bot.url}"
        assert len(together.key_checks) == 1 and together.total_requests == 0
        assert [c.method for c in slack.calls] == ["auth.test"]
    finally:
        bot.stop()
