"""The `/rl-session` grammar, parsed without I/O.

`/rl-session <id>` shows a card; `subscribe <id> [status] [checkpoints]
[errors-only]`, `unsubscribe <id>`, `mute <id> <duration>`, `unmute <id>`,
`digest on HH:MM [Area/City]`, `digest off`, `list` and `help` do what they
say. Anything else is answered with usage, never sent to Together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.models import is_session_id

Verb = Literal["show", "subscribe", "unsubscribe", "list", "help", "mute", "unmute", "digest"]
MAX_COMMAND_TEXT = 4000
FILTERS = ("status", "checkpoints", "errors-only")
DEFAULT_FILTERS = frozenset({"status"})
MAX_MUTE = timedelta(days=30)
_DURATION_RE = re.compile(r"^(?:(\d{1,4})d)?(?:(\d{1,5})h)?(?:(\d{1,6})m)?$")
_TIME_RE = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
MUTE_USAGE = "Give a duration such as `30m`, `2h`, `1d` or `1h30m` (at most 30 days)."
DIGEST_USAGE = "Use `digest on HH:MM [Area/City]` (24-hour time, e.g. `digest on 09:00 Europe/Berlin`) or `digest off`."


@dataclass(frozen=True)
class Command:
    verb: Verb
    session_id: str | None = None
    problem: str | None = None  # set when the text cannot be acted on
    filters: frozenset[str] = DEFAULT_FILTERS
    duration: timedelta | None = None
    digest_time: str | None = None  # "HH:MM", None = digest off
    timezone: str | None = None


def parse(text: str | None) -> Command:
    words = (text or "")[:MAX_COMMAND_TEXT].split()
    if not words:
        return Command("help")
    head = words[0].lower()
    if head in ("help", "-h", "--help", "?"):
        return Command("help")
    if head == "list":
        if len(words) > 1:
            return Command("list", problem="`list` takes no arguments.")
        return Command("list")
    if head == "subscribe":
        return _subscribe(words[1:])
    if head in ("unsubscribe", "show", "unmute"):
        verb: Verb = head  # type: ignore[assignment]
        if len(words) != 2:
            return Command(verb, problem=f"`{head}` takes exactly one session id.")
        return _with_id(verb, words[1])
    if head == "mute":
        return _mute(words[1:])
    if head == "digest":
        return _digest(words[1:])
    if len(words) > 1:
        return Command("help", problem="I did not understand that.")
    return _with_id("show", words[0])


def _with_id(verb: Verb, candidate: str, **extra: object) -> Command:
    if not is_session_id(candidate):
        return Command(verb, problem="invalid_id")
    return Command(verb, session_id=candidate, **extra)  # type: ignore[arg-type]


def _subscribe(args: list[str]) -> Command:
    if not args:
        return Command("subscribe", problem="`subscribe` needs a session id.")
    wanted = [a.lower() for a in args[1:]]
    unknown = [w for w in wanted if w not in FILTERS]
    if unknown:
        return Command(
            "subscribe",
            problem=f"Unknown filter. Filters are {', '.join(f'`{f}`' for f in FILTERS)}.",
        )
    filters = frozenset(wanted) or DEFAULT_FILTERS
    if {"status", "errors-only"} <= filters:
        return Command(
            "subscribe", problem="Choose `status` (every change) or `errors-only`, not both."
        )
    return _with_id("subscribe", args[0], filters=filters)


def parse_duration(text: str) -> timedelta | None:
    """`30m`, `2h`, `1d`, `1h30m` -> a timedelta between 1 minute and 30 days."""
    match = _DURATION_RE.fullmatch(text.strip().lower())
    if not match or not any(match.groups()):
        return None
    days, hours, minutes = (int(g) if g else 0 for g in match.groups())
    duration = timedelta(days=days, hours=hours, minutes=minutes)
    if duration < timedelta(minutes=1) or duration > MAX_MUTE:
        return None
    return duration


def _mute(args: list[str]) -> Command:
    if len(args) != 2:
        return Command("mute", problem=f"`mute` takes a session id and a duration. {MUTE_USAGE}")
    duration = parse_duration(args[1])
    if duration is None:
        return Command(
            "mute", problem=f"`{_quote(args[1])}` is not a duration I accept. {MUTE_USAGE}"
        )
    return _with_id("mute", args[0], duration=duration)


def _digest(args: list[str]) -> Command:
    if args == ["off"]:
        return Command("digest", digest_time=None)
    if len(args) not in (2, 3) or args[0].lower() != "on":
        return Command("digest", problem=DIGEST_USAGE)
    match = _TIME_RE.fullmatch(args[1])
    if not match:
        return Command(
            "digest", problem=f"`{_quote(args[1])}` is not a time of day. {DIGEST_USAGE}"
        )
    zone = args[2] if len(args) == 3 else None
    if zone is not None:
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError, OSError):  # "America" is a directory
            return Command(
                "digest", problem=f"`{_quote(zone)}` is not a time zone I know. {DIGEST_USAGE}"
            )
    hh, mm = int(match.group(1)), int(match.group(2))
    return Command("digest", digest_time=f"{hh:02d}:{mm:02d}", timezone=zone)


def _quote(text: str) -> str:
    """User text echoed back inside backticks: short, and unable to break out."""
    cleaned = text.replace("`", "'").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return cleaned[:40] + ("…" if len(cleaned) > 40 else "")
