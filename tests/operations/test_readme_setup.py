"""README's way to a real workspace can be followed in the order given: the app
is made from the manifest and installed before its secrets are copied, the bot
starts once `.env` holds them, and the Request URL is verified once it runs.
Every setting the bot stops for at that start is named in the steps before it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.settings.model import Settings
from tests.support import REPO

SETTING = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")


def _steps() -> list[str]:
    """The numbered steps of README's "Connect it to your workspace", each with its
    continuation lines."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Connect it to your workspace", 1)[1].split("\n## ", 1)[0]
    steps: list[str] = []
    for line in section.splitlines():
        if re.match(r"^\d+\. ", line):
            steps.append(line)
        elif steps and line.startswith("   "):
            steps[-1] += "\n" + line
        elif steps and line.strip():
            break  # the paragraph after the list
    return steps


def _first(steps: list[str], pattern: str) -> int:
    found = [i for i, step in enumerate(steps) if re.search(pattern, step)]
    assert found, f"no step of README's set-up matches {pattern!r}"
    return found[0]


def _start(steps: list[str]) -> int:
    return _first(steps, r"rl-bot serve")


def test_readme_steps_come_in_an_order_that_works() -> None:
    steps = _steps()
    assert [int(s.split(".", 1)[0]) for s in steps] == list(range(1, len(steps) + 1))
    manifest = _first(steps, r"From an app manifest")
    install = _first(steps, r"Install to Workspace")
    secrets = _first(steps, r"cp \.env\.example \.env")
    start = _start(steps)
    verify = max(i for i, s in enumerate(steps) if "Request URL" in s)
    assert manifest < install < secrets < start < verify, steps


def test_readme_steps_name_only_real_settings() -> None:
    named = {name for step in _steps() for name in SETTING.findall(step)}
    assert named, "README's steps name no setting"
    assert named <= {field.upper() for field in Settings.model_fields}, named


@pytest.mark.slow  # runs rl-bot as a subprocess
def test_readme_steps_name_every_setting_the_bot_stops_for(tmp_path: Path) -> None:
    """Step 3's `.env`, as copied, then step 4's `rl-bot serve`: each setting its
    lines name is one the steps before the start told the person to fill in."""
    shutil.copy(REPO / ".env.example", tmp_path / ".env")
    started = subprocess.run(
        [sys.executable, "-m", "bot", "serve"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2, started.stderr
    wanted = set(SETTING.findall(started.stderr))
    assert {"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "TOGETHER_API_KEY"} <= wanted, wanted
    steps = _steps()
    before = "\n".join(steps[: _start(steps)])
    assert not {name for name in wanted if f"`{name}`" not in before}, started.stderr


def test_contributing_states_the_tests_facts_and_they_hold() -> None:
    """What a run needs and does (time, Chromium, the databases it makes), where a
    user looks: CONTRIBUTING, and one line of README."""
    contributing = (REPO / "CONTRIBUTING.md").read_text()
    readme = (REPO / "README.md").read_text()
    for page in (contributing, readme):
        assert "`rlbot_*`" in page and "RLBOT_TEST_PG" in page and "Chromium" in page
        assert re.search(r"about \d+ minutes", page), "no run time stated"
    # the facts: the variable the suite reads, the databases it names, the browser tests
    assert 'os.environ.get("RLBOT_TEST_PG"' in (REPO / "tests" / "conftest.py").read_text()
    sources = [
        p
        for p in [*(REPO / "tests").rglob("*.py"), *(REPO / "bench").rglob("*.py")]
        if p.resolve() != Path(__file__).resolve()
    ]
    creating = 0
    for path in sources:
        text = path.read_text()
        for variable in re.findall(r'CREATE DATABASE "\{(\w+)\}"', text):
            creating += 1
            assert re.search(rf'{variable} = f"rlbot_', text), (path, variable)
    assert creating >= 3
    browser = REPO / "tests" / "demo" / "test_demo_page.py"
    assert browser.exists() and "tests/demo/test_demo_page.py" in contributing
