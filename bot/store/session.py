"""The names features type-hint a database session with, so that only the store
imports SQLAlchemy.

A service opens its own short transaction (`async with sessionmaker() as db,
db.begin():`) and hands `db` to the queries in `bot.store.queries`; it never
builds a statement itself.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

#: one session on the database, inside a transaction a service opened
Db: TypeAlias = AsyncSession
#: what opens those sessions: the `Runtime`'s, built once from `DATABASE_URL`
Sessionmaker: TypeAlias = async_sessionmaker[AsyncSession]
#: the engine the `Runtime` holds and disposes of
Engine: TypeAlias = AsyncEngine
#: a row of a read too wide to spell its columns' types (read by name)
WideRow: TypeAlias = Row[*tuple[Any, ...]]
