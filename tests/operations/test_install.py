"""A non-editable install (`pip install .`, a wheel, pipx) migrates and serves.

The wheel is built from a copy of the sources and installed into a fresh venv
outside the repository, with no alembic.ini and no `migrations/` beside it: what
it needs must be in the package. Its dependencies come from the test venv's
site-packages (a `.pth` line), so the install is offline and takes seconds.
"""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.support import REPO, base_env, free_tcp_port, query, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.long("builds a wheel and a venv, and runs it")]


def _run(
    args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done


def _wheel(tmp_path: Path) -> Path:
    """`pip wheel` of a copy of the package's sources (a build in the checkout
    would leave build/ and egg-info behind)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src)
    shutil.copytree(REPO / "bot", src / "bot", ignore=shutil.ignore_patterns("__pycache__"))
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(src)])
    [wheel] = tmp_path.glob("rl_bot-*.whl")
    return wheel


def _venv(tmp_path: Path, wheel: Path) -> Path:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    purelib = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    ).stdout.strip()
    # The dependencies, and nothing of the checkout: a path line only adds the
    # directory, it runs none of its .pth files (the editable install's among them).
    (Path(purelib) / "test-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            str(wheel),
        ]
    )
    return venv


def test_a_wheel_installed_elsewhere_migrates_and_serves(
    tmp_path_factory: pytest.TempPathFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    build = tmp_path_factory.mktemp("wheel")
    venv = _venv(build, _wheel(build))
    work = tmp_path_factory.mktemp("elsewhere")
    url = f"sqlite:///{work}/rl-bot.db"
    env = base_env(db_url=url, slack=slack, together=together)
    env.pop("PYTHONPATH", None)

    where = _run(
        [str(venv / "bin" / "python"), "-c", "import bot; print(bot.__file__)"], cwd=work, env=env
    )
    assert where.stdout.startswith(str(venv)), where.stdout  # the wheel's, not the checkout's

    migrated = _run([str(venv / "bin" / "rl-bot"), "migrate"], cwd=work, env=env)
    assert "latest schema" in migrated.stdout
    assert query(url, "SELECT count(*) FROM alembic_version") == [(1,)]

    port = free_tcp_port()
    with (work / "serve.log").open("wb") as log:
        serve = subprocess.Popen(
            [str(venv / "bin" / "rl-bot"), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:

        def healthy() -> bool:
            assert serve.poll() is None, (work / "serve.log").read_text()
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(healthy, timeout=60, what="/healthz of the installed bot")
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10)
        assert ready.status_code == 200, ready.text
    finally:
        serve.terminate()
        serve.wait(timeout=30)
