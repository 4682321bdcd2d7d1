"""A session maker on a fresh, migrated database of each backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.store.engine import make_engine, make_sessionmaker


@pytest.fixture
async def maker(db_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = make_engine(db_url)
    try:
        yield make_sessionmaker(engine)
    finally:
        await engine.dispose()
