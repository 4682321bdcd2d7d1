"""`rl-bot serve | socket | migrate | show <id>`.

Configuration problems are one line each on stderr and exit code 2; an
out-of-date schema is exit code 3 with the command that fixes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence

from bot.config import Mode, Settings

log = logging.getLogger("bot")
EXIT_CONFIG = 2
EXIT_SCHEMA = 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rl-bot", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the bot in HTTP mode (POST /slack/events)")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=None)
    socket = sub.add_parser("socket", help="run the bot over Socket Mode (no public URL)")
    socket.add_argument("--host", default=None, help="for /healthz and /metrics")
    socket.add_argument("--port", type=int, default=None)
    sub.add_parser("migrate", help="apply database migrations (alembic upgrade head)")
    show = sub.add_parser("show", help="print one session's card in the terminal")
    show.add_argument("session_id")
    show.add_argument("--json", action="store_true", help="print the Block Kit JSON instead")
    return parser


def _settings(mode: Mode) -> Settings:
    try:
        settings = Settings()
    except Exception as exc:  # pydantic's message names the field
        first = str(exc).splitlines()
        print(f"rl-bot: invalid configuration: {' '.join(first[:3])}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    problems = settings.problems_for(mode)
    for problem in problems:
        print(f"rl-bot: {problem}", file=sys.stderr)
    if problems:
        raise SystemExit(EXIT_CONFIG)
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command: Mode = args.command
    settings = _settings(command)
    from bot.logs import configure_logging

    configure_logging(settings.log_level, settings.log_format, settings.secrets())
    if command == "migrate":
        return _migrate(settings)
    if command == "show":
        return asyncio.run(_show(settings, args.session_id, as_json=args.json))
    if (code := _check_schema(settings)) != 0:
        return code
    host = args.host or settings.host
    port = args.port or settings.port
    if command == "socket":
        from bot.socket_mode import run_socket

        return asyncio.run(run_socket(settings, host=host, port=port))
    return _serve(settings, host=host, port=port)


def _migrate(settings: Settings) -> int:
    from bot.migrations import upgrade

    try:
        upgrade(settings.database_url)
    except Exception as exc:
        print(f"rl-bot: migration failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print("rl-bot: database is at the latest schema")
    return 0


def _check_schema(settings: Settings) -> int:
    """SQLite (one process, the quick start) migrates itself; PostgreSQL must be migrated."""
    from bot.db import is_sqlite
    from bot.migrations import current_revision, head_revision, upgrade

    if is_sqlite(settings.database_url):
        upgrade(settings.database_url)
        return 0
    try:
        current = asyncio.run(current_revision(settings.database_url))
    except Exception as exc:
        print(f"rl-bot: cannot reach the database: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    head = head_revision(settings.database_url)
    if current != head:
        print(
            f"rl-bot: the database schema is at {current or 'nothing (empty database)'} but this "
            f"version needs {head}; run `rl-bot migrate` first",
            file=sys.stderr,
        )
        return EXIT_SCHEMA
    return 0


def _serve(settings: Settings, *, host: str, port: int) -> int:
    from bot.runtime import build_runtime
    from bot.slack_app import build_app
    from bot.web import create_web_app, http_server

    rt = build_runtime(settings)
    http_server(create_web_app(rt, build_app(rt)), host=host, port=port).run()
    return 0


async def _show(settings: Settings, session_id: str, *, as_json: bool) -> int:
    import httpx

    from bot.models import is_session_id
    from bot.rendering import as_text, card
    from bot.together import USER_MESSAGES, TogetherClient, TogetherError

    if not is_session_id(session_id):
        print(f"rl-bot: {USER_MESSAGES['invalid_id']}", file=sys.stderr)
        return 1
    assert settings.together_api_key is not None
    async with httpx.AsyncClient() as http:
        client = TogetherClient(
            http,
            base_url=settings.together_base_url,
            api_key=settings.together_api_key.get_secret_value(),
            timeout=settings.together_timeout_seconds,
        )
        try:
            session = await client.get_session(session_id, retries=2)
        except TogetherError as exc:
            print(f"rl-bot: {exc.user_message}", file=sys.stderr)
            return 1
    message = card(session)
    print(json.dumps(message, indent=2) if as_json else as_text(message))
    return 0
