"""One engine and one sessionmaker, built from `DATABASE_URL`.

Plain `sqlite:///…` and `postgresql://…` URLs are accepted and given their
async driver, so operators can paste the URL their platform hands them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy import CursorResult, event
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.ext.asyncio import AsyncSession as AsyncSession

from bot.store.database_url import async_url


def make_engine(url: str, **kwargs: Any) -> AsyncEngine:
    aurl = async_url(url)
    if aurl.startswith("sqlite"):
        engine = create_async_engine(
            aurl, connect_args={"timeout": 30}, json_serializer=finite_json, **kwargs
        )

        @event.listens_for(engine.sync_engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 10)
    return create_async_engine(
        aurl, pool_pre_ping=True, pool_recycle=1800, json_serializer=finite_json, **kwargs
    )


def finite_json(value: Any) -> str:
    """A JSON column's text, a non-finite float (Together may send `1e999`) as null:
    `json` would write `Infinity`, which is not JSON, and PostgreSQL refuses it."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


def rows_touched(result: object) -> int:
    """How many rows an UPDATE, DELETE or INSERT touched (0 when the driver cannot say)."""
    return max(0, result.rowcount or 0) if isinstance(result, CursorResult) else 0


def insert_ignoring(db: AsyncSession, table: Any, *, conflict: Sequence[str] | None = None) -> Any:
    """`INSERT … ON CONFLICT (conflict) DO NOTHING` for the database `db` talks to.

    SQLite and PostgreSQL spell it alike, from their own dialect modules; `table`
    is an ORM entity or a Core table (the Core table keeps an executemany whose
    rows hold None in one statement: an ORM bulk insert leaves None out and splits)."""
    return _dialect(db).insert(table).on_conflict_do_nothing(index_elements=conflict)


def upsert(db: AsyncSession, table: Any, values: dict[str, Any], *, key: Sequence[str]) -> Any:
    """`INSERT … ON CONFLICT (key) DO UPDATE` of `values`, spelt for the database
    `db` talks to (as `insert_ignoring`); `values` holds the key columns too."""
    changed = {k: v for k, v in values.items() if k not in key}
    return (
        _dialect(db)
        .insert(table)
        .values(**values)
        .on_conflict_do_update(index_elements=list(key), set_=changed)
    )


def _dialect(db: AsyncSession) -> Any:
    """The SQLAlchemy dialect module of the database `db` talks to, imported only
    then: a bot on SQLite never loads PostgreSQL's (megabytes it would keep)."""
    if db.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql
    from sqlalchemy.dialects import sqlite

    return sqlite
