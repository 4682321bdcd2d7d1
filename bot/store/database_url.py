"""`DATABASE_URL` as operators paste it, turned into the URL the async engine needs.

Plain `sqlite:///…` and `postgresql://…` URLs are accepted and given their
async driver, so a URL from a hosting platform works as it is handed over.

The URL is read here, with SQLAlchemy's own parser, rather than in
`bot.settings`: what the engine will make of it is the database adapter's
knowledge, and the settings (the kernel, below the store) hold it as text. The
CLI asks this module whether it is usable and which part of it is a secret,
beside the settings' own checks (`problems`, `secrets`).
"""

from __future__ import annotations

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgres": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "postgresql+psycopg2": "postgresql+asyncpg",
    "postgresql+psycopg": "postgresql+asyncpg",
}
_ASYNC = {"sqlite+aiosqlite", "postgresql+asyncpg"}


def async_url(url: str) -> str:
    """Return `url` with an async driver; raise ValueError for anything else."""
    if "://" not in url:
        raise ValueError("expected a URL such as sqlite:///./rl-bot.db or postgresql://host/db")
    scheme, rest = url.split("://", 1)
    scheme = _DRIVERS.get(scheme, scheme)
    if scheme not in _ASYNC:
        raise ValueError(f"unsupported database scheme {scheme.split('+')[0]!r}")
    try:
        parsed = make_url(f"{scheme}://{rest}")
    except ArgumentError as exc:
        raise ValueError("cannot parse it") from exc
    return parsed.render_as_string(hide_password=False)


def is_sqlite(url: str) -> bool:
    """Whether the URL names the embedded SQLite database."""
    return async_url(url).startswith("sqlite")


def database_file(url: str) -> str | None:
    """The database part of the URL (the file, for SQLite)."""
    return make_url(async_url(url)).database


def problems(url: str) -> list[str]:
    """Why `DATABASE_URL` cannot be used, as one human line; empty when it can."""
    try:
        async_url(url)
    except ValueError as exc:
        return [f"DATABASE_URL is not usable: {exc}"]
    return []


def secrets(url: str) -> list[str]:
    """The URL's password, for log redaction; empty when it has none or is unreadable."""
    try:
        password = make_url(url).password
    except Exception:
        password = None
    return [str(password)] if password else []
