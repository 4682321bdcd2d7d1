"""Process-wide logging: JSON lines (default) or a console format, secrets redacted.

Only the stdlib is used. `configure_logging` installs exactly one handler on the
root logger (calling it again replaces that handler rather than adding a second)
writing to stderr, or to `stream` when given (tests pass a StringIO).

Redaction happens in two places, both driven by one `SecretRedactor`:

* as a `logging.Filter` on the handler, which rewrites the record's message
  (msg % args), its string `extra=` values and its exception text before any
  formatter sees them;
* inside each formatter's `format()`, on the final text, so whatever got past
  the filter (a secret inside a nested `extra` value, a traceback rendered
  late, a JSON-escaped copy of a secret) is caught as well.

Secrets shorter than `MIN_SECRET_LEN` characters are ignored: redacting "abc"
everywhere would mangle ordinary log lines and protects nothing.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import IO, Any, Literal

__all__ = [
    "MIN_SECRET_LEN",
    "REDACTED",
    "ConsoleFormatter",
    "JsonFormatter",
    "SecretRedactor",
    "configure_logging",
]

REDACTED = "[redacted]"
MIN_SECRET_LEN = 6

# Loggers that are chatty at INFO and say nothing an operator needs (the start-up
# log is kept short: uvicorn's and the scheduler's start-up lines repeat "ready").
QUIET_LOGGERS: dict[str, int] = {
    "httpx": logging.WARNING,
    "httpcore": logging.WARNING,
    "apscheduler.executors": logging.WARNING,
    "apscheduler.scheduler": logging.WARNING,
    "alembic.runtime.plugins": logging.WARNING,
    "uvicorn.error": logging.WARNING,
}

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RESERVED = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys()
    | {"message", "asctime", "taskName"}
)

_HANDLER_MARK = "_rlbot_handler"


class SecretRedactor(logging.Filter):
    """Replaces every configured secret with `[redacted]`.

    Usable as a handler filter (rewrites the record in place) and as a plain
    `redact(text)` function for formatter output.
    """

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        super().__init__()
        variants: set[str] = set()
        for secret in secrets:
            if not secret or len(secret) < MIN_SECRET_LEN:
                continue
            variants.add(secret)
            # The same secret as it appears inside a JSON string literal
            # (quotes, backslashes, control or non-ASCII characters escaped).
            for ensure_ascii in (True, False):
                variants.add(json.dumps(secret, ensure_ascii=ensure_ascii)[1:-1])
            # ...and inside a repr() (e.g. a dict of params logged with %r).
            variants.add(repr(secret)[1:-1])
        # Longest first so a secret that contains another is removed whole.
        ordered = sorted((v for v in variants if len(v) >= MIN_SECRET_LEN), key=len, reverse=True)
        self._pattern: re.Pattern[str] | None = (
            re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None
        )

    @property
    def active(self) -> bool:
        return self._pattern is not None

    def redact(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)

    def filter(self, record: logging.LogRecord) -> bool:
        if self._pattern is None:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: let the formatter report it
            return True
        record.msg = self.redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        for key, value in list(record.__dict__.items()):
            if key not in _RESERVED and isinstance(value, str):
                setattr(record, key, self.redact(value))
        return True


def _iso_utc(created: float) -> str:
    stamp = datetime.fromtimestamp(created, tz=UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


# Extras some libraries add that only repeat the message: uvicorn's `color_message`
# is `msg` with ANSI colour codes, which have no place in a JSON line or a log file.
_DROPPED_EXTRAS = frozenset({"color_message"})


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {
        k: v
        for k, v in record.__dict__.items()
        if k not in _RESERVED and k not in _DROPPED_EXTRAS and not k.startswith("_")
    }


def _exception_text(formatter: logging.Formatter, record: logging.LogRecord) -> str | None:
    if record.exc_info and not record.exc_text:
        record.exc_text = formatter.formatException(record.exc_info)
    return record.exc_text or None


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, extra fields, exc."""

    def __init__(self, redactor: SecretRedactor | None = None) -> None:
        super().__init__()
        self._redactor = redactor or SecretRedactor()

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": _iso_utc(record.created),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in _extras(record).items():
            if key not in payload:
                payload[key] = value
        exc = _exception_text(self, record)
        if exc:
            payload["exc"] = exc
        if record.stack_info:
            payload["stack"] = self.formatStack(record.stack_info)
        text = json.dumps(payload, default=str, ensure_ascii=False, separators=(",", ":"))
        return self._redactor.redact(text)


class ConsoleFormatter(logging.Formatter):
    """Human-readable: `ts LEVEL logger: msg key=value ...` then any traceback."""

    def __init__(self, redactor: SecretRedactor | None = None) -> None:
        super().__init__()
        self._redactor = redactor or SecretRedactor()

    def format(self, record: logging.LogRecord) -> str:
        line = (
            f"{_iso_utc(record.created)} {record.levelname:<8} {record.name}: {record.getMessage()}"
        )
        extras = _extras(record)
        if extras:
            line += " " + " ".join(f"{k}={v}" for k, v in extras.items())
        exc = _exception_text(self, record)
        if exc:
            line += "\n" + exc
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return self._redactor.redact(line)


def _level(level: str) -> tuple[int, bool]:
    value = logging.getLevelName(level.strip().upper())
    if isinstance(value, int):
        return value, True
    return logging.INFO, False


def configure_logging(
    level: str,
    fmt: Literal["json", "console"],
    secrets: Iterable[str | None],
    *,
    stream: IO[str] | None = None,
) -> None:
    """Route all logging to one stderr (or `stream`) handler; idempotent.

    `secrets` are the raw secret values (tokens, signing secret, API keys,
    the database password); `None` and short values are skipped.
    """
    redactor = SecretRedactor(secrets)
    formatter: logging.Formatter = (
        ConsoleFormatter(redactor) if fmt == "console" else JsonFormatter(redactor)
    )
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter)
    handler.addFilter(redactor)
    setattr(handler, _HANDLER_MARK, True)

    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, _HANDLER_MARK, False):
            root.removeHandler(old)
            old.close()
    root.addHandler(handler)

    numeric, known = _level(level)
    root.setLevel(numeric)
    for name, quiet in QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(quiet)
    logging.captureWarnings(True)
    if not known:
        logging.getLogger(__name__).warning("unknown LOG_LEVEL %r, using INFO", level)
