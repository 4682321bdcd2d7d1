"""The grammar of `alert`, `alerts` and `budget`, parsed without I/O.

`alert <id>|* <metric> <op> <value> [for <duration>] [page]` adds a rule,
`alert <id>|* off [<metric>]` removes rules, `alerts [<id>|*]` lists them;
`budget <id> $<amount>`, `budget * $<amount>/day` and `budget <id>|* off` set
and remove budgets. Each bad word gets its own answer (a string here).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import timedelta

from bot.commands.session_ref import is_session_ref
from bot.rendering.text import code_span
from bot.rendering.usage import ALERT_USAGE, BUDGET_USAGE
from bot.training.thresholds import MAX_BUDGET, OPS, Op

EVERY = "*"
MAX_METRIC_NAME = 64
MAX_HOLD = timedelta(days=30)
_METRIC_RE = re.compile(r"^[A-Za-z0-9_./-]+$")
_HOLD_RE = re.compile(r"^(?:(\d{1,4})d)?(?:(\d{1,5})h)?(?:(\d{1,6})m)?(?:(\d{1,7})s)?$")
_AMOUNT_RE = re.compile(r"^\$?([0-9][0-9,]*(?:\.[0-9]+)?)(/day)?$")
_ECHO = 41
#: Slack escapes these in a command's text
_ENTITIES = {"&lt;": "<", "&gt;": ">", "&amp;": "&"}


@dataclass(frozen=True)
class RuleSpec:
    """`alert`: a rule to add (`op` set) or rules to remove (`op` None)."""

    session_id: str  # a session id or "*" (a display name until it is resolved)
    metric: str | None
    op: Op | None = None
    threshold: float = 0.0
    hold: timedelta = timedelta(0)
    page: bool = False


@dataclass(frozen=True)
class BudgetSpec:
    """`budget`: an amount to set (None: remove), daily for `*`."""

    session_id: str
    amount: float | None
    daily: bool = False


def _target(word: str) -> str | None:
    return word if word == EVERY or is_session_ref(word) else None


def parse_alert(args: list[str]) -> RuleSpec | str:
    """A rule, or why not (mrkdwn, user text quoted)."""
    args = [_ENTITIES.get(a, a) for a in args]
    if len(args) < 2:
        return f"`alert` needs a session id or name (or `*`) and a rule. {ALERT_USAGE}"
    target = _target(args[0])
    if target is None:
        return f"{code_span(args[0], _ECHO)} is not a session id, a name or `*`. {ALERT_USAGE}"
    if args[1].lower() == "off":
        if len(args) > 3:
            return f"`alert &lt;id&gt; off` takes at most one metric. {ALERT_USAGE}"
        metric = args[2] if len(args) == 3 else None
        if metric is not None and (problem := _metric_problem(metric)):
            return problem
        return RuleSpec(target, metric)
    if len(args) < 4:
        return f"A rule needs a metric, an operator and a value. {ALERT_USAGE}"
    metric, op, value = args[1], args[2], args[3]
    if problem := _metric_problem(metric):
        return problem
    known = next((o for o in OPS if o == op), None)
    if known is None:
        return f"{code_span(op, _ECHO)} is not an operator: use `&lt;`, `&lt;=`, `&gt;` or `&gt;=`."
    threshold = _number(value)
    if threshold is None:
        return f"{code_span(value, _ECHO)} is not a finite number."
    hold, page, rest = timedelta(0), False, [a.lower() for a in args[4:]]
    while rest:
        word = rest.pop(0)
        if word == "page" and not page:
            page = True
        elif word == "for" and rest and hold == timedelta(0):
            found = _hold(rest.pop(0))
            if isinstance(found, str):
                return found
            hold = found
        else:
            return f"I did not understand {code_span(word, _ECHO)}. {ALERT_USAGE}"
    return RuleSpec(target, metric, known, threshold, hold, page)


def parse_alerts(args: list[str]) -> str | bool | None:
    """`alerts [<id>|*]`: the session named (None: all), or False when the word is bad."""
    if not args:
        return None
    if len(args) == 1 and (target := _target(args[0])) is not None:
        return target
    return False


def parse_budget(args: list[str]) -> BudgetSpec | str:
    if len(args) != 2:
        return f"`budget` takes a session id or name (or `*`) and an amount. {BUDGET_USAGE}"
    target = _target(args[0])
    if target is None:
        return f"{code_span(args[0], _ECHO)} is not a session id, a name or `*`. {BUDGET_USAGE}"
    if args[1].lower() == "off":
        return BudgetSpec(target, None, daily=target == EVERY)
    match = _AMOUNT_RE.fullmatch(args[1].lower())
    amount = _number(match.group(1).replace(",", "")) if match else None
    if match is None or amount is None or not 0 < amount <= MAX_BUDGET:
        return (
            f"{code_span(args[1], _ECHO)} is not an amount I accept: a positive, finite "
            f"number of dollars, at most $1,000,000. {BUDGET_USAGE}"
        )
    daily = match.group(2) is not None
    if daily != (target == EVERY):
        return (
            "A daily budget (`$&lt;amount&gt;/day`) is the channel's, over every session: "
            f"give it as `budget * $&lt;amount&gt;/day`; a session's budget has no `/day`. {BUDGET_USAGE}"
        )
    return BudgetSpec(target, amount, daily=daily)


def _metric_problem(metric: str) -> str | None:
    if len(metric) > MAX_METRIC_NAME:
        return f"A metric name is at most {MAX_METRIC_NAME} characters."
    if not _METRIC_RE.fullmatch(metric):
        return f"{code_span(metric, _ECHO)} is not a metric name (letters, digits and `_ . / -`)."
    return None


def _number(text: str) -> float | None:
    if len(text) > 40:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _hold(text: str) -> timedelta | str:
    match = _HOLD_RE.fullmatch(text)
    if match is None or not any(match.groups()):
        return f"{code_span(text, _ECHO)} is not a duration: use e.g. `30s`, `10m`, `2h` or `1d`."
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    hold = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if hold > MAX_HOLD:
        return "A rule's `for` is at most 30 days."
    return hold
