"""`rl-bot serve | socket | migrate | show <id> | demo`.

Configuration problems, and a Slack token or Together key the service refuses
at start, are one line each on stderr and exit code 2; an out-of-date schema
is exit code 3 with the command that fixes it; a SQLite file that cannot be
used (another rl-bot process has it, or its directory is missing or read-only)
is exit code 4.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from bot.settings.model import Mode, Settings

if TYPE_CHECKING:
    from bot.slack.preflight import Verdict

log = logging.getLogger("bot")
EXIT_CONFIG = 2
EXIT_SCHEMA = 3
EXIT_IN_USE = 4
# The lock on the SQLite file, held (open) for the life of the process.
_sqlite_lock: IO[str] | None = None


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
    demo = sub.add_parser(
        "demo", help="the bot in a local Slack-like page, on simulated Slack, Together and W&B"
    )
    demo.add_argument("--port", type=_port, default=3000, help="the page's port (127.0.0.1)")
    demo.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="how fast the story's sessions move (1: real time, the story in 3 min; at most 100)",
    )
    demo.add_argument("--open", action="store_true", help="open the page in a browser")
    return parser


#: the environment's proxies (any case), which the demo never uses
_PROXY_VARIABLES = frozenset({"http_proxy", "https_proxy", "all_proxy"})


def _port(text: str) -> int:
    """A port to listen on and print: 0 would be one the system picks, not the one
    printed (nor the one the page's guard expects)."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port from 1 to 65535")
    return port


def _settings(mode: Mode) -> Settings:
    try:
        settings = Settings()
    except Exception as exc:  # pydantic's message names the field
        first = str(exc).splitlines()
        print(f"rl-bot: invalid configuration: {' '.join(first[:3])}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    from bot.store import database_url

    problems = settings.problems_for(mode) + database_url.problems(settings.database_url)
    for problem in problems:
        print(f"rl-bot: {problem}", file=sys.stderr)
    if problems:
        raise SystemExit(EXIT_CONFIG)
    return settings


def _secrets(settings: Settings) -> list[str]:
    """What the logs redact: the settings' secrets and DATABASE_URL's password."""
    from bot.store import database_url

    return settings.secrets() + database_url.secrets(settings.database_url)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in ("serve", "socket", "demo"):  # long-running: before any thread starts
        from bot.ops.malloc import cap_arenas

        cap_arenas()
    if args.command == "demo":
        return _demo(port=args.port, speed=args.speed, open_browser=args.open)
    command: Mode = args.command
    settings = _settings(command)
    from bot.ops.logs import configure_logging

    configure_logging(settings.log_level, settings.log_format, _secrets(settings))
    if command == "migrate":
        return _migrate(settings)
    if command == "show":
        return asyncio.run(_show(settings, args.session_id, as_json=args.json))
    if (checked := _check_secrets(settings)) is None:
        return EXIT_CONFIG
    if (problem := _lock_sqlite(settings.database_url)) is not None:
        print(f"rl-bot: {problem}", file=sys.stderr)
        return EXIT_IN_USE
    if (code := _check_schema(settings)) != 0:
        return code
    host = args.host or settings.host
    port = args.port or settings.port
    if command == "socket":
        from bot.slack.socket_mode import run_socket

        return asyncio.run(run_socket(settings, host=host, port=port, checked=checked))
    return _serve(settings, host=host, port=port, checked=checked)


def _check_secrets(settings: Settings) -> list[Verdict] | None:
    """None when Slack or Together refused a secret (said on stderr); else the
    checks, for `/readyz`. Before anything touches the database."""
    from bot.slack.preflight import check_secrets

    verdicts = asyncio.run(check_secrets(settings))
    refused = [v for v in verdicts if v.state == "refused"]
    for verdict in refused:
        print(f"rl-bot: {verdict.setting} was refused: {verdict.detail}", file=sys.stderr)
    if refused:
        return None
    if unreachable := [v for v in verdicts if v.state == "unreachable"]:
        log.warning(
            "starting without checking %s (%s); /readyz answers 503 until a check gets through",
            " and ".join(v.setting for v in unreachable),
            "; ".join(v.detail for v in unreachable),
        )
    return verdicts


def _demo(*, port: int, speed: float, open_browser: bool) -> int:
    """No secrets asked: the demo's settings point only at its own simulated services
    and its own temporary database (DATABASE_URL is not read)."""
    from bot.demo.world import MAX_SPEED

    if not 0 < speed <= MAX_SPEED:
        print(f"rl-bot: --speed must be above 0 and at most {MAX_SPEED:g}", file=sys.stderr)
        return EXIT_CONFIG
    # Every service the demo talks to is its own, on loopback: a proxy of the
    # environment would carry its requests off the machine, where they fail.
    # slack_sdk reads HTTP(S)_PROXY without NO_PROXY, so they go; "*" covers httpx.
    for name in [n for n in os.environ if n.lower() in _PROXY_VARIABLES]:
        del os.environ[name]
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "*"
    from bot.demo.run import Demo
    from bot.ops.logs import configure_logging

    demo = Demo.start(speed=speed, port=port)
    try:
        settings = demo.settings
        configure_logging("WARNING", "console", _secrets(settings))
        if (problem := _lock_sqlite(settings.database_url)) is not None:
            print(f"rl-bot: {problem}", file=sys.stderr)
            return EXIT_IN_USE
        if (code := _check_schema(settings)) != 0:
            return code
        return demo.serve(host="127.0.0.1", port=port, open_browser=open_browser)
    finally:
        demo.stop()


def _migrate(settings: Settings) -> int:
    """One line per script applied, or one saying there was none to apply."""
    from bot.store.migrations import head_revision, upgrade

    done: list[str] = []

    def applied(revision: str, message: str) -> None:
        done.append(revision)
        print(f"rl-bot: applied migration {revision}: {message}", flush=True)

    try:
        upgrade(settings.database_url, quiet=True, applied=applied)
    except Exception as exc:
        print(f"rl-bot: migration failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if not done:
        head = head_revision(settings.database_url)
        print(f"rl-bot: the database was already at the latest schema ({head}); nothing to apply")
    return 0


def _lock_sqlite(url: str) -> str | None:
    """One process per SQLite file: claims there are not atomic across processes
    (the driver opens its transaction only at the UPDATE), so a second process,
    such as an overlapping restart, could send a row twice. None when this
    process may go on (PostgreSQL, or the lock is ours), else why not."""
    global _sqlite_lock
    from bot.store.database_url import database_file, is_sqlite

    if not is_sqlite(url):
        return None
    database = database_file(url)
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    path = Path(database).resolve()
    lock_path = path.with_name(path.name + ".lock")
    try:
        handle = open(lock_path, "a+")  # noqa: SIM115 - held open until the process ends
    except OSError as exc:
        return (
            f"cannot use the SQLite database {path} (DATABASE_URL): its lock file "
            f"{lock_path} cannot be created: {exc.strerror}. The directory {path.parent} "
            f"must exist and be writable by this user (uid {os.getuid()}); in the container "
            "image that is /data, the working directory"
        )
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip()[:20]
        handle.close()
        who = f" (pid {holder})" if holder.isdigit() else ""
        return (
            f"another rl-bot process{who} is using the SQLite database {path}. SQLite "
            "supports one rl-bot process: stop the other one first, or use PostgreSQL "
            "to run several replicas"
        )
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    _sqlite_lock = handle
    return None


def _check_schema(settings: Settings) -> int:
    """SQLite (one process, the quick start) migrates itself; PostgreSQL must be migrated."""
    from bot.store.database_url import is_sqlite
    from bot.store.migrations import current_revision, head_revision, upgrade_in_child

    if is_sqlite(settings.database_url):
        # Alembic stays out of this process: a child migrates, and only when there
        # is something to migrate.
        try:
            current = asyncio.run(current_revision(settings.database_url))
        except Exception:
            current = None  # the upgrade says what is wrong
        head = head_revision(settings.database_url)
        if current is None or current != head:
            upgrade_in_child(settings.database_url)
            log.info("migrated the SQLite database from %s to %s", current or "empty", head)
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


def _serve(settings: Settings, *, host: str, port: int, checked: list[Verdict]) -> int:
    from bot.runtime import build_runtime
    from bot.slack.app import build_app
    from bot.slack.web import create_web_app, http_server

    rt = build_runtime(settings)
    web = create_web_app(rt, build_app(rt), checked=checked)
    http_server(web, host=host, port=port, replica=rt.owner).run()
    return 0


async def _show(settings: Settings, session_id: str, *, as_json: bool) -> int:
    import httpx

    from bot.rendering import card
    from bot.rendering.terminal import as_text
    from bot.slack.preflight import together_words
    from bot.together.client import TogetherClient
    from bot.together.errors import USER_MESSAGES, TogetherError
    from bot.training.sessions import is_session_id

    if not is_session_id(session_id):
        print(f"rl-bot: {USER_MESSAGES['invalid_id'].replace('`', '')}", file=sys.stderr)
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
            words = exc.user_message if exc.kind == "not_found" else together_words(exc)
            print(f"rl-bot: {words}", file=sys.stderr)
            return 1
    message = card(session)
    print(json.dumps(message, indent=2) if as_json else as_text(message))
    return 0
