"""Alembic environment: the same Settings and metadata as the app."""

from __future__ import annotations

import asyncio
from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection

from bot.outbox.table import OutboxMessage
from bot.settings.model import Settings
from bot.store.chart_tables import ChartRefusal
from bot.store.database_url import async_url
from bot.store.engine import make_engine
from bot.store.rule_tables import MetricRule
from bot.store.tables import Base

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

# Every table: `bot.store.tables`'s, the rules' and the charts', and the outbox's,
# which lives with its contract.
assert OutboxMessage.__table__.metadata is Base.metadata
assert MetricRule.__table__.metadata is Base.metadata
assert ChartRefusal.__table__.metadata is Base.metadata
target_metadata = Base.metadata


def _url() -> str:
    return str(config.attributes.get("database_url") or Settings().database_url)


def run_migrations_offline() -> None:
    context.configure(
        url=async_url(_url()),
        target_metadata=target_metadata,
        literal_binds=True,
        compare_type=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    # `rl-bot migrate` hears of each script as it is applied (`bot.store.migrations.upgrade`).
    on_apply = config.attributes.get("on_version_apply")
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        render_as_batch=connection.dialect.name == "sqlite",
        on_version_apply=[on_apply] if on_apply is not None else (),
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = make_engine(_url())
    async with engine.connect() as connection:
        await connection.run_sync(_run)
        await connection.commit()
    await engine.dispose()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
    else:
        asyncio.run(_run_async())


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
