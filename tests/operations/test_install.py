"""A non-editable install (`pip install .`, a wheel, pipx) migrates and serves.

The wheel is built from a copy of the sources and installed into a fresh venv
outside the repository, with no alembic.ini and no `migrations/` beside it: what
it needs must be in the package (the top-level `migrations/` ships as
`bot.migrations`). Its dependencies come from the test venv's site-packages (a
`.pth` line), so the install is offline and takes seconds. Building the wheel and
an editable install print no setuptools warnings (pip shows them with `-v`).
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from bot.simulated import FakeSlack, FakeTogether
from tests.conftest import PG_BASE
from tests.support import (
    REPO,
    base_env,
    free_tcp_port,
    pg_admin,
    postgres_available,
    query,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.long("builds a wheel and a venv, and runs it")]


def _run(
    args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done


#: what setuptools says of a package layout it does not like (pip shows it with -v)
_SETUPTOOLS_WARNING = re.compile(
    r"setuptools.*Warning|absent from the `packages`|SetuptoolsDeprecation"
)


def _sources(tmp_path: Path) -> Path:
    """A copy of what the wheel is built from (a build in the checkout would leave
    build/ and egg-info behind)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src)
    for name in ("bot", "migrations"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    return src


#: what setuptools says of every editable install whose packages it maps through a
#: finder (here `bot.migrations` from migrations/), whatever the layout: not a fault
#: of the layout, so an editable install may say it; the wheel's build may not
_EDITABLE_NOTICE = "BuildBackendWarning: Editable installation."


def _quiet(done: subprocess.CompletedProcess[str], *, editable: bool = False) -> None:
    said = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if _SETUPTOOLS_WARNING.search(line) and not (editable and _EDITABLE_NOTICE in line)
    ]
    assert not said, "\n".join(said)


def _wheel(tmp_path: Path, src: Path) -> Path:
    """`pip wheel` of the sources, which setuptools builds without a warning."""
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(tmp_path), str(src)]
    )
    _quiet(built)
    [wheel] = tmp_path.glob("rl_bot-*.whl")
    return wheel


def _venv(tmp_path: Path, wheel: Path | str, *, name: str = "venv", editable: bool = False) -> Path:
    venv = tmp_path / name
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    purelib = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    ).stdout.strip()
    # The dependencies, and nothing of the checkout: a path line only adds the
    # directory, it runs none of its .pth files (the editable install's among them).
    (Path(purelib) / "test-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    installed = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-v",
            "--no-deps",
            *(["-e"] if editable else []),
            str(wheel),
        ]
    )
    _quiet(installed, editable=editable)
    return venv


def _empty_postgres() -> str | None:
    """A new, empty PostgreSQL database (not the tests' migrated template), or None
    when PostgreSQL does not answer and is not required."""
    if not postgres_available(PG_BASE):
        if os.environ.get("RLBOT_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required but not reachable at {PG_BASE}")
        return None
    name = f"rlbot_wheel_{uuid.uuid4().hex[:12]}"
    pg_admin(PG_BASE, f'CREATE DATABASE "{name}"')
    return name


def _serves_ready(venv: Path, work: Path, env: dict[str, str]) -> None:
    """`rl-bot serve` of the installed package answers /healthz, then /readyz 200
    (the database at the scripts' head)."""
    port = free_tcp_port()
    log_path = work / f"serve-{port}.log"
    with log_path.open("wb") as log:
        serve = subprocess.Popen(
            [str(venv / "bin" / "rl-bot"), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:

        def healthy() -> bool:
            assert serve.poll() is None, log_path.read_text()
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


def test_a_wheel_installed_elsewhere_migrates_and_serves(
    tmp_path_factory: pytest.TempPathFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    build = tmp_path_factory.mktemp("wheel")
    src = _sources(build)
    venv = _venv(build, _wheel(build, src))
    # An editable install of the same sources says nothing either.
    _venv(build, src, name="editable", editable=True)
    work = tmp_path_factory.mktemp("elsewhere")
    sqlite_url = f"sqlite:///{work}/rl-bot.db"
    pg_name = _empty_postgres()
    urls = [sqlite_url] + ([f"{PG_BASE}/{pg_name}"] if pg_name else [])
    try:
        for url in urls:
            env = base_env(db_url=url, slack=slack, together=together)
            env.pop("PYTHONPATH", None)

            where = _run(
                [
                    str(venv / "bin" / "python"),
                    "-c",
                    "import bot.migrations; print(bot.migrations.__file__)",
                ],
                cwd=work,
                env=env,
            )
            assert where.stdout.startswith(str(venv)), (
                where.stdout
            )  # the wheel's, not the checkout's

            migrated = _run([str(venv / "bin" / "rl-bot"), "migrate"], cwd=work, env=env)
            assert "0016" in migrated.stdout or "applied" in migrated.stdout, migrated.stdout
            assert query(url, "SELECT count(*) FROM alembic_version") == [(1,)]
            _serves_ready(venv, work, env)
    finally:
        if pg_name:
            pg_admin(PG_BASE, f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
