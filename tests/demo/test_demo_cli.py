"""`rl-bot demo` from a shell on a fresh machine: no `.env`, no secrets, no network."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support import free_tcp_port

pytestmark = pytest.mark.slow


def _bare_env() -> dict[str, str]:
    """The environment of someone who has only installed the package."""
    prefixes = ("SLACK_", "TOGETHER_", "WANDB_", "DATABASE_URL")
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


def test_demo_starts_with_no_env_file_and_no_secrets(tmp_path: Path) -> None:
    port = free_tcp_port()
    log = tmp_path / "demo.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "bot", "demo", "--port", str(port)],
            cwd=tmp_path,
            env=_bare_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 90
        while f"Open http://127.0.0.1:{port}" not in log.read_text():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        page = httpx.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert page.status_code == 200
        assert 'aria-label="Message #rl-demo"' in page.text
        script = httpx.get(f"http://127.0.0.1:{port}/static/app.js", timeout=10)
        assert script.status_code == 200 and "EventSource" in script.text
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    assert code == 0, log.read_text()
    assert not list(tmp_path.glob("*.db")), "the demo's database is a temporary one"


def test_a_taken_port_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "bot", "demo", "--port", str(port)],
            cwd=tmp_path,
            env=_bare_env(),
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.parametrize("port", ["0", "99999", "-5"])
def test_a_port_out_of_range_is_one_line_and_exit_2(tmp_path: Path, port: str) -> None:
    """`--port 0` printed `Open http://127.0.0.1:0` and served on a port of the
    system's choosing, where the page refused every request (its Host was not
    `127.0.0.1:0`); 99999 and -5 ended in an OverflowError traceback."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bot", "demo", "--port", port],
            cwd=tmp_path,
            env=_bare_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired as running:
        pytest.fail(f"--port {port} started a demo: {running.stdout!r}")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "--port" in done.stderr and "1 to 65535" in done.stderr
    assert "Open" not in done.stdout
