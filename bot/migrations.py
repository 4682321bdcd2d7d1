"""Alembic from inside the app: `rl-bot migrate`, and the schema check at start."""

from __future__ import annotations

import os
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.db import make_engine


def alembic_config(database_url: str) -> Config:
    ini = os.environ.get("RLBOT_ALEMBIC_INI") or str(
        Path(__file__).resolve().parent.parent / "alembic.ini"
    )
    if not Path(ini).is_file():
        raise FileNotFoundError(f"alembic.ini not found at {ini}; set RLBOT_ALEMBIC_INI")
    config = Config(ini)
    config.attributes["database_url"] = database_url
    config.attributes["configure_logger"] = False
    return config


def upgrade(database_url: str) -> None:
    command.upgrade(alembic_config(database_url), "head")


def head_revision(database_url: str) -> str | None:
    return ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()


async def current_revision(database_url: str) -> str | None:
    engine = make_engine(database_url)
    try:
        async with engine.connect() as conn:
            return await read_revision(conn)
    finally:
        await engine.dispose()


async def read_revision(conn: AsyncConnection) -> str | None:
    """The revision stamped in the database, read on an open async connection."""

    def read(sync_conn: Connection) -> str | None:
        return MigrationContext.configure(sync_conn).get_current_revision()

    return await conn.run_sync(read)
