"""The repository's layout as the package ships it: the migration scripts live at
the top (`migrations/`, tracked by git) and install as `bot.migrations`; every
package under `bot/` is in pyproject's list, so none is left out of the wheel."""

from __future__ import annotations

import configparser
import subprocess
import tomllib
from pathlib import Path

import pytest
from setuptools import find_namespace_packages

from bot.store.migrations import scripts_dir
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
