"""A running `rl-bot demo` and a headless Chromium looking at it, for the page's tests.

The demo runs as people start it (`rl-bot demo`, forked with the bot's imports done,
as `tests.forked_bot` starts bots), in a directory whose `.env`
and environment point every Slack, Together and W&B setting, and every proxy, at a
port where nothing answers: if the demo used any of them, nothing on the page would
work. Its DATABASE_URL names a "production" SQLite file that must never be created.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import forked_bot
from tests.forked_bot import ForkedProcess
from tests.support import free_tcp_port

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: where the real services would be: a port with nothing listening
NOWHERE = "http://127.0.0.1:9"
#: a proxy for every request, as on many office machines: the demo talks only to
#: loopback and must use none (here it would answer nothing)
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
REAL_LOOKING = {
    "SLACK_BOT_TOKEN": "xoxb-real-looking-token",
    "SLACK_SIGNING_SECRET": "real-looking-signing-secret",
    "SLACK_API_URL": f"{NOWHERE}/api/",
    "TOGETHER_API_KEY": "real-looking-together-key",
    "TOGETHER_BASE_URL": f"{NOWHERE}/v1",
    "WANDB_API_KEY": "real-looking-wandb-key",
    "WANDB_BASE_URL": NOWHERE,
    "ONCALL_CHANNEL": "CREALONCALL",
    "STOP_ALLOWED_USER_IDS": "UGUEST",
}


@dataclass
class Demo:
    url: str
    process: ForkedProcess
    log: Path
    #: where DATABASE_URL points: the demo must leave it alone
    production: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """`rl-bot demo` at a crawl (`--speed 0.01`): the tests move its story with "+1 min".
    One a module: its tests leave each other's sessions and answers alone."""
    workdir = tmp_path_factory.mktemp("demo")
    (workdir / ".env").write_text("".join(f"{k}={v}\n" for k, v in REAL_LOOKING.items()))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "TOGETHER_")) and k.lower() != "no_proxy"
    }
    production = workdir / "production.db"
    env.update(REAL_LOOKING, PYTHONUNBUFFERED="1", DATABASE_URL=f"sqlite:///{production}")
    env.update({name: NOWHERE for name in PROXIES})
    port = free_tcp_port()
    log = workdir / "demo.log"
    log.write_bytes(b"")
    args = ["demo", "--port", str(port), "--speed", "0.01"]
    process = forked_bot.launch(args, env=env, cwd=workdir, log_path=log)
    running = Demo(f"http://127.0.0.1:{port}", process, log, production)
    deadline = time.monotonic() + 90
    while f"Open {running.url}" not in running.output():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"rl-bot demo did not start:\n{running.output()}")
        time.sleep(0.1)
    yield running
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium, Debian's (never a downloaded one)."""
    if not CHROMIUM.exists():
        if os.environ.get("RLBOT_REQUIRE_CHROMIUM") == "1":
            pytest.fail("no /usr/bin/chromium: apt-get install -y chromium")
        pytest.skip("no /usr/bin/chromium (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(demo: Demo, browser: Any) -> Iterator[Any]:
    """A fresh page on the demo, as `ada` (you), in its own browser context."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        tab = context.new_page()
        tab.set_default_timeout(30_000)
        tab.goto(demo.url)
        yield tab
    finally:
        context.close()
