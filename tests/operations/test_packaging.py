"""The repository's layout as the package ships it: the migration scripts live at
the top (`migrations/`, tracked by git) and install as `bot.migrations`; every
package under `bot/` is in pyproject's list, so none is left out of the wheel."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from setuptools import find_namespace_packages

from bot.store.migrations import head_revision, scripts_dir
from tests.support import REPO


def _setuptools() -> dict[str, object]:
    with (REPO / "pyproject.toml").open("rb") as f:
        config: dict[str, object] = tomllib.load(f)["tool"]["setuptools"]
    return config


def test_every_package_under_bot_and_the_migrations_are_in_the_wheel() -> None:
    config = _setuptools()
    found = set(find_namespace_packages(where=str(REPO), include=["bot*"]))
    assert set(config["packages"]) == found | {"bot.migrations", "bot.migrations.versions"}  # type: ignore[arg-type]
    assert config["package-dir"] == {"bot.migrations": "migrations"}
    assert not (REPO / "bot" / "migrations").exists()


@pytest.mark.slow  # runs git
def test_git_tracks_the_migration_scripts_at_the_top_of_the_repository() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "migrations/"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    scripts = sorted(
        str(p.relative_to(REPO)) for p in (REPO / "migrations" / "versions").glob("*.py")
    )
    assert scripts and set(scripts) <= set(listed), (scripts, listed)
    assert {"migrations/env.py", "migrations/script.py.mako"} <= set(listed)


def test_alembic_ini_and_the_running_bot_read_the_same_scripts() -> None:
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(REPO / "alembic.ini")
    location = ini["alembic"]["script_location"].replace("%(here)s", str(REPO))
    assert Path(location).resolve() == (REPO / "migrations").resolve()
    assert scripts_dir().resolve() == Path(location).resolve()


@pytest.mark.slow  # copies the package and runs `rl-bot migrate` in a process
def test_a_checkout_from_before_the_move_still_migrates(tmp_path: Path) -> None:
    """Git moves the scripts out of `bot/migrations/` but leaves the `__pycache__`
    directories Python wrote there: `bot.migrations` then imports as an empty
    namespace package ahead of pyproject's mapping, and every command that migrates
    (`migrate`, `demo`, `serve` on SQLite) ended in Alembic's 'Path doesn't exist …
    use the init command'."""
    for name in ("bot", "migrations"):
        skip = shutil.ignore_patterns("__pycache__")
        shutil.copytree(REPO / name, tmp_path / name, ignore=skip)
    stale = tmp_path / "bot" / "migrations" / "versions" / "__pycache__"
    stale.mkdir(parents=True)
    (stale / "0001_initial_schema.cpython-311.pyc").write_bytes(b"")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env |= {"PYTHONPATH": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path / 'm.db'}"}
    done = subprocess.run(
        [sys.executable, "-m", "bot", "migrate"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"applied migration {head_revision('sqlite://')}:" in done.stdout, done.stdout
