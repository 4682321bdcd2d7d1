"""Alembic from inside the app: `rl-bot migrate`, and the schema check at start.

The running bot only compares revisions (the start-up check, `/readyz`): it reads
the head from the migration scripts' own `revision` / `down_revision` lines and
the database's from `alembic_version`, without importing Alembic, which with
Mako costs the process megabytes for good. Alembic is imported to migrate (in a
child process when the bot migrates its own SQLite file at start,
`upgrade_in_child`), and to find the head when the scripts are not one straight
line."""

from __future__ import annotations

import ast
import logging
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.store.engine import make_engine

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic's default, which migrations/env.py keeps.
VERSION_TABLE = "alembic_version"


def scripts_dir() -> Path:
    """The migration scripts: the repository's top-level `migrations/`, installed as
    `bot.migrations` (pyproject.toml maps it), so an installed wheel migrates as a
    checkout does.

    A checkout from before the scripts moved keeps `bot/migrations/__pycache__/`
    (git leaves what it does not track), and Python then imports `bot.migrations`
    as that empty namespace package, ahead of the mapping: the checkout's own
    `migrations/` is used then."""
    installed = Path(str(resources.files("bot.migrations")))
    if (installed / "env.py").is_file():
        return installed
    checkout = Path(__file__).resolve().parents[2] / "migrations"
    return checkout if (checkout / "env.py").is_file() else installed


def alembic_config(database_url: str) -> Config:
    """Alembic's configuration in code: an installed package has no alembic.ini
    (the repository's, for the `alembic` command, points at the same scripts)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(scripts_dir()))
    config.set_main_option("path_separator", "os")
    config.attributes["database_url"] = database_url
    config.attributes["configure_logger"] = False
    return config


#: told of each script as it is applied: its revision and its message
Applied = Callable[[str, str], None]


def upgrade(database_url: str, *, quiet: bool = False, applied: Applied | None = None) -> None:
    """`quiet`: Alembic's own log lines are left out (the bot migrating its own
    SQLite file at start says so in one line; `rl-bot migrate` says one line per
    script through `applied`)."""
    from alembic import command

    alembic_log = logging.getLogger("alembic")
    level = alembic_log.level
    if quiet:
        alembic_log.setLevel(logging.WARNING)
    config = alembic_config(database_url)
    if applied is not None:

        def on_version_apply(*, step: Any, **_: Any) -> None:
            if step.is_upgrade:
                applied(str(step.up_revision_id), " ".join(str(step.up_revision.doc or "").split()))

        config.attributes["on_version_apply"] = on_version_apply
    try:
        command.upgrade(config, "head")
    finally:
        alembic_log.setLevel(level)


#: what the child of `upgrade_in_child` runs: the URL is its one argument
_CHILD = "import sys; from bot.store.migrations import upgrade; upgrade(sys.argv[1], quiet=True)"


def upgrade_in_child(database_url: str) -> None:
    """`upgrade`, in a child Python process: the bot that migrates its own SQLite
    file at start never imports Alembic and Mako, which would stay in its memory
    for the life of the process though it never migrates again. Raises with the
    child's last words when the migration failed."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, database_url],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        words = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeError(f"migration failed: {words[-1] if words else done.returncode}")


def head_revision(database_url: str) -> str | None:
    """The newest revision of the migration scripts."""
    return _scripts_head() or _alembic_head(database_url)


def _alembic_head(database_url: str) -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()


@cache
def _scripts_head() -> str | None:
    """The head as the scripts in `versions` say it, when they form one line of
    plain `revision = "…"` / `down_revision = …` assignments; else None (Alembic
    decides). The scripts do not change while the process runs."""
    versions = scripts_dir() / "versions"
    try:
        revisions: set[str] = set()
        parents: set[str] = set()
        for script in versions.glob("*.py"):
            names = _assigned(script, ("revision", "down_revision"))
            revision, down = names.get("revision"), names.get("down_revision")
            if not isinstance(revision, str) or not (down is None or isinstance(down, str)):
                return None  # a merge, a branch label, or not a literal: Alembic's job
            revisions.add(revision)
            if down is not None:
                parents.add(down)
    except (OSError, SyntaxError, ValueError):
        return None
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 and parents <= revisions else None


def _assigned(script: Path, names: tuple[str, ...]) -> dict[str, object]:
    """The literal values a script's module level assigns to `names`."""
    found: dict[str, object] = {}
    for node in ast.parse(script.read_text(encoding="utf-8")).body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and target.id in names and value is not None:
            found[target.id] = ast.literal_eval(value)
    return found


async def current_revision(database_url: str) -> str | None:
    engine = make_engine(database_url)
    try:
        async with engine.connect() as conn:
            return await read_revision(conn)
    finally:
        await engine.dispose()


async def read_revision(conn: AsyncConnection) -> str | None:
    """The revision stamped in the database (None when it has none yet), read on
    an open async connection as Alembic reads it: the one row of alembic_version."""

    def read(sync_conn: Connection) -> str | None:
        if not inspect(sync_conn).has_table(VERSION_TABLE):
            return None
        stamped = sync_conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).all()
        if len(stamped) > 1:
            raise RuntimeError(f"{VERSION_TABLE} has more than one revision: {stamped}")
        return str(stamped[0][0]) if stamped else None

    return await conn.run_sync(read)


async def reachable_revision(engine: AsyncEngine) -> str | None:
    """Ask the database for an answer (`SELECT 1`), then for its revision: what a
    readiness check needs. Raises when the database cannot be reached."""
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))
        return await read_revision(conn)
