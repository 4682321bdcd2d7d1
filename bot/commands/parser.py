"""The `/rl-session` grammar, parsed without I/O.

`/rl-session <id>` shows a card; `subscribe <id> [status] [checkpoints]
[errors-only] [stall=…] [target=…] [broadcast=errors|ends|all|off] [dm=creator]`, `unsubscribe <id>`, `mute <id> <duration>`, `unmute <id>`,
`digest on HH:MM [Area/City]`, `digest off`, `list`, `ls [running|creating|
error|all] [mine|@user] [model=<name>]` (grammar in `bot.commands.ls_query`),
`follow mine|@user|all [model=<name>] [filters] [stall=…] [existing]` and
`unfollow mine|@user|all [model=<name>]` (`bot.commands.follow_query`)
`chart <id> [metric …]` and `help` do what they say. Wherever `<id>` is written, a
session's display name may stand instead (`bot.commands.session_ref`; resolved in
`bot.commands.names`). Anything else is answered with usage, never sent to Together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import timedelta
from enum import StrEnum
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.commands.follow_query import EVERYONE, FollowSpec
from bot.commands.ls_query import MAX_MODEL, ListQuery, parse_args, slack_user
from bot.commands.rule_query import (
    EVERY,
    BudgetSpec,
    RuleSpec,
    parse_alert,
    parse_alerts,
    parse_budget,
)
from bot.commands.session_ref import is_session_ref
from bot.rendering.text import code_span
from bot.rendering.usage import (
    BROADCAST_USAGE,
    CHART_USAGE,
    CHART_USAGE_SUBSCRIBE,
    DIGEST_USAGE,
    DM_USAGE,
    FOLLOW_USAGE,
    MUTE_USAGE,
    STALL_USAGE,
    STOP_BUTTON_USAGE,
    TARGET_USAGE,
    unpicked_user,
)
from bot.subscriptions.options import (
    BROADCASTS,
    DEFAULT_FILTERS,
    DMS,
    FILTERS,
    KEEP_THREAD,
    MAX_TARGET,
    ThreadOptions,
)
from bot.training.sessions import TrainingSession

Verb = Literal[
    "show",
    "subscribe",
    "unsubscribe",
    "list",
    "ls",
    "help",
    "mute",
    "unmute",
    "digest",
    "follow",
    "unfollow",
    "chart",
    "alert",
    "alerts",
    "budget",
]
MAX_COMMAND_TEXT = 4000
MAX_MUTE = timedelta(days=30)
_DURATION_RE = re.compile(r"^(?:(\d{1,4})d)?(?:(\d{1,5})h)?(?:(\d{1,6})m)?$")
_TIME_RE = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
_OPTIONS = ("stall=", "target=", "broadcast=", "dm=", "chart=")
MAX_CHART_METRICS = 6
_METRIC_RE = re.compile(r"^[A-Za-z0-9_./-]{1,128}$")
_ECHO_LIMIT = 41  # user text quoted back in a reason: short, and unable to break out


class Problem(StrEnum):
    """Why a command's text cannot be acted on; each is answered its own way."""

    INVALID_ID = "invalid_id"  # not a session id or name: refused, nothing leaves the bot
    USAGE = "usage"  # anything else: `reason`, then the usage


@dataclass(frozen=True)
class Command:
    verb: Verb
    session_id: str | None = None
    problem: Problem | None = None  # set when the text cannot be acted on
    reason: str = ""  # what is wrong, for a USAGE problem (mrkdwn, user text quoted)
    duration: timedelta | None = None
    digest_time: str | None = None  # "HH:MM", None = digest off
    timezone: str | None = None
    listing: ListQuery | None = None  # `ls`: which sessions
    # `subscribe <id> [filters] [stall=…] [target=…] [broadcast=…] [dm=…] [chart=…]`:
    # the thread's options; one not given keeps the thread's
    options: ThreadOptions = KEEP_THREAD
    rule: FollowSpec | None = None  # `follow` / `unfollow`: which rule
    # `chart <id> [metric …]`: the metrics named (empty: WANDB_METRICS)
    metrics: tuple[str, ...] = ()
    # `alert …`: the rule to add or remove (`bot.commands.rule_query`)
    metric_rule: RuleSpec | None = None
    # `alerts [<id>|*]`: whose rules to list (None: all of the channel's)
    rules_of: str | None = None
    # `budget …`: the budget to set or remove
    budget: BudgetSpec | None = None
    # the session as read from Together while its name was resolved (saves a GET)
    session: TrainingSession | None = None

    @property
    def target(self) -> str | None:
        """The one session this command names, as typed (an id or a display name);
        None when it names none, or every one (`*`)."""
        word = (
            self.session_id
            or (self.metric_rule.session_id if self.metric_rule else None)
            or (self.budget.session_id if self.budget else None)
            or self.rules_of
        )
        return None if word is None or word == EVERY else word

    def naming(self, session_id: str, session: TrainingSession | None = None) -> Command:
        """This command with the session it named given by its id."""
        if self.session_id is not None:
            return replace(self, session_id=session_id, session=session)
        if self.metric_rule is not None:
            rule = replace(self.metric_rule, session_id=session_id)
            return replace(self, metric_rule=rule, session=session)
        if self.budget is not None:
            budget = replace(self.budget, session_id=session_id)
            return replace(self, budget=budget, session=session)
        return replace(self, rules_of=session_id, session=session)


def parse(text: str | None) -> Command:
    words = (text or "")[:MAX_COMMAND_TEXT].split()
    if not words:
        return Command("help")
    head = words[0].lower()
    if head in ("help", "-h", "--help", "?"):
        return Command("help")
    if head == "list":
        if len(words) > 1:
            return _usage("list", "`list` takes no arguments.")
        return Command("list")
    if head == "ls":
        query = parse_args(words[1:])
        return _usage("ls", query) if isinstance(query, str) else Command("ls", listing=query)
    if head == "subscribe":
        return _parse_subscribe(words[1:])
    if head in ("follow", "unfollow"):
        return _parse_follow(head, words[1:])
    if head in ("unsubscribe", "show", "unmute"):
        verb: Verb = head  # type: ignore[assignment]
        if len(words) != 2:
            return _usage(verb, f"`{head}` takes exactly one session id or name.")
        return _with_id(verb, words[1])
    if head == "mute":
        return _parse_mute(words[1:])
    if head == "digest":
        return _parse_digest(words[1:])
    if head == "chart":
        return _parse_chart(words[1:])
    if head in ("alert", "alerts", "budget"):
        return _parse_rules(head, words[1:])
    if head == "stop":
        return _usage("help", STOP_BUTTON_USAGE)
    if len(words) > 1:
        return _usage("help", "I did not understand that.")
    return _with_id("show", words[0])


def _parse_rules(head: str, args: list[str]) -> Command:
    """`alert`, `alerts` and `budget` (grammar in `bot.commands.rule_query`)."""
    if head == "alert":
        rule = parse_alert(args)
        return (
            _usage("alert", rule) if isinstance(rule, str) else Command("alert", metric_rule=rule)
        )
    if head == "budget":
        budget = parse_budget(args)
        if isinstance(budget, str):
            return _usage("budget", budget)
        return Command("budget", budget=budget)
    whose = parse_alerts(args)
    if whose is False:
        return _usage("alerts", "`alerts` takes at most one session id or name (or `*`).")
    return Command("alerts", rules_of=whose if isinstance(whose, str) else None)


def _usage(verb: Verb, reason: str) -> Command:
    return Command(verb, problem=Problem.USAGE, reason=reason)


def _with_id(verb: Verb, candidate: str, **extra: object) -> Command:
    if not is_session_ref(candidate):
        return Command(verb, problem=Problem.INVALID_ID)
    return Command(verb, session_id=candidate, **extra)  # type: ignore[arg-type]


def _parse_subscribe(args: list[str]) -> Command:
    if not args:
        return _usage("subscribe", "`subscribe` needs a session id or name.")
    stall = [a for a in args[1:] if a.lower().startswith("stall=")]
    target = [a for a in args[1:] if a.lower().startswith("target=")]
    wanted = [a.lower() for a in args[1:] if not a.lower().startswith(_OPTIONS)]
    chart = [a.lower()[len("chart=") :] for a in args[1:] if a.lower().startswith("chart=")]
    if chart and (len(chart) > 1 or chart[0] not in ("end", "off")):
        return _usage("subscribe", CHART_USAGE_SUBSCRIBE)
    broadcast = _choice(args[1:], "broadcast=", BROADCASTS)
    if broadcast is False:
        return _usage("subscribe", BROADCAST_USAGE)
    dm = _choice(args[1:], "dm=", (*DMS, "off"))
    if dm is False:
        return _usage("subscribe", DM_USAGE)
    stall_minutes = None
    if stall:
        stall_minutes = _stall_minutes(stall[-1][len("stall=") :])
        if len(stall) > 1 or stall_minutes is None:
            return _usage("subscribe", STALL_USAGE)
    target_step = None
    if target:
        target_step = _target_step(target[-1][len("target=") :])
        if len(target) > 1 or target_step is None:
            return _usage("subscribe", TARGET_USAGE)
    unknown = [w for w in wanted if w not in FILTERS]
    if unknown:
        return _usage(
            "subscribe",
            f"Unknown filter. Filters are {', '.join(f'`{f}`' for f in FILTERS)}.",
        )
    filters = frozenset(wanted) or DEFAULT_FILTERS
    if {"status", "errors-only"} <= filters:
        return _usage("subscribe", "Choose `status` (every change) or `errors-only`, not both.")
    options = ThreadOptions.model_validate(
        {
            "filters": filters,
            "stall_after_minutes": stall_minutes,
            "target_step": target_step,
            "broadcast": broadcast,
            "dm": None if dm is None else ("" if dm == "off" else dm),
            "chart_on_end": (chart[0] == "end") if chart else None,
        }
    )
    return _with_id("subscribe", args[0], options=options)


def _parse_follow(head: str, args: list[str]) -> Command:
    """`follow mine|@user|all [model=…] [filters] [stall=…] [existing]`; `unfollow`
    takes the selector and `model=` only."""
    verb: Verb = "follow" if head == "follow" else "unfollow"
    if not args:
        return _usage(verb, f"`{head}` needs `mine`, `@user` or `all`. {FOLLOW_USAGE}")
    first = args[0]
    who = first.lower() if first.lower() in ("mine", EVERYONE) else slack_user(first)
    if who is None:
        if first.startswith(("@", "<@")):
            return _usage(verb, unpicked_user(first))
        return _usage(verb, f"`{head}` needs `mine`, `@user` or `all` first. {FOLLOW_USAGE}")
    model: str | None = None
    stall: list[str] = []
    wanted: list[str] = []
    existing = False
    for word in args[1:]:
        lowered = word.lower()
        if lowered.startswith("model="):
            name = word[len("model=") :].strip()
            if model is not None or not name or len(name) > MAX_MODEL:
                return _usage(
                    verb, f"Give one `model=&lt;name&gt;` of at most {MAX_MODEL} characters."
                )
            model = name
        elif verb == "unfollow":
            return _usage(
                verb, f"`unfollow` takes the rule's selector and `model=` only. {FOLLOW_USAGE}"
            )
        elif lowered.startswith("stall="):
            stall.append(word[len("stall=") :])
        elif lowered == "existing":
            existing = True
        elif lowered in FILTERS:
            wanted.append(lowered)
        else:
            return _usage(verb, f"Unknown word in a rule. {FOLLOW_USAGE}")
    stall_minutes = None
    if stall:
        stall_minutes = _stall_minutes(stall[-1])
        if len(stall) > 1 or stall_minutes is None:
            return _usage(verb, STALL_USAGE)
    filters = frozenset(wanted) or DEFAULT_FILTERS
    if {"status", "errors-only"} <= filters:
        return _usage(verb, "Choose `status` (every change) or `errors-only`, not both.")
    options = ThreadOptions(filters=filters, stall_after_minutes=stall_minutes)
    spec = FollowSpec(who, model, options, existing)
    return Command(verb, rule=spec)


def _choice(args: list[str], prefix: str, allowed: tuple[str, ...]) -> str | bool | None:
    """The one `prefix<value>` among `args` when it is allowed (lower-cased), None
    when there is none, False when it is given twice or not allowed."""
    given = [a[len(prefix) :].lower() for a in args if a.lower().startswith(prefix)]
    if not given:
        return None
    if len(given) > 1 or given[0] not in allowed:
        return False
    return given[0]


def _parse_chart(args: list[str]) -> Command:
    if not args:
        return _usage("chart", f"`chart` needs a session id or name. {CHART_USAGE}")
    names: list[str] = []
    for word in args[1:]:
        if not _METRIC_RE.fullmatch(word):
            return _usage(
                "chart", f"{code_span(word, _ECHO_LIMIT)} is not a metric name. {CHART_USAGE}"
            )
        if word not in names:
            names.append(word)
    if len(names) > MAX_CHART_METRICS:
        return _usage("chart", f"That is more than {MAX_CHART_METRICS} metrics. {CHART_USAGE}")
    return _with_id("chart", args[0], metrics=tuple(names))


def _target_step(text: str) -> int | None:
    """`2000` or `2,000` or `2_000` -> 2000, between 1 and 10^12; else None."""
    digits = text.replace(",", "").replace("_", "")
    if not digits.isascii() or not digits.isdigit() or len(digits) > 13:
        return None
    step = int(digits)
    return step if 1 <= step <= MAX_TARGET else None


def _stall_minutes(text: str) -> int | None:
    """`off` -> 0; a duration (`30m`, `2h`) -> whole minutes; else None."""
    if text.lower() == "off":
        return 0
    duration = parse_duration(text)
    return None if duration is None else int(duration.total_seconds() // 60)


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


def _parse_mute(args: list[str]) -> Command:
    if len(args) != 2:
        return _usage("mute", f"`mute` takes a session id or name and a duration. {MUTE_USAGE}")
    duration = parse_duration(args[1])
    if duration is None:
        return _usage(
            "mute", f"{code_span(args[1], _ECHO_LIMIT)} is not a duration I accept. {MUTE_USAGE}"
        )
    return _with_id("mute", args[0], duration=duration)


def _parse_digest(args: list[str]) -> Command:
    if args == ["off"]:
        return Command("digest", digest_time=None)
    if len(args) not in (2, 3) or args[0].lower() != "on":
        return _usage("digest", DIGEST_USAGE)
    match = _TIME_RE.fullmatch(args[1])
    if not match:
        return _usage(
            "digest", f"{code_span(args[1], _ECHO_LIMIT)} is not a time of day. {DIGEST_USAGE}"
        )
    zone = args[2] if len(args) == 3 else None
    if zone is not None:
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError, OSError):  # "America" is a directory
            return _usage(
                "digest",
                f"{code_span(zone, _ECHO_LIMIT)} is not a time zone I know. {DIGEST_USAGE}",
            )
    hh, mm = int(match.group(1)), int(match.group(2))
    return Command("digest", digest_time=f"{hh:02d}:{mm:02d}", timezone=zone)
