"""Metric rules and spend budgets in words (pure): a rule as the channel gave
it, the answers to `alert` and `budget`, the crossing it fired on, a budget's
warning with its forecast, and the list `alerts` answers with."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.rendering.blocks import (
    MAX_BLOCKS,
    MAX_SECTION_TEXT,
    Message,
    context_block,
    message_of,
    section_block,
)
from bot.rendering.text import (
    code_span,
    escape,
    inert,
    safe_link,
    safe_mention,
    slack_len,
    truncate,
)
from bot.rendering.words import count_words, duration_words, money_words
from bot.training.thresholds import OPS

MAX_METRIC = 64


@dataclass(frozen=True)
class RuleWords:
    """What a rule is, as stored."""

    session_id: str
    metric: str
    op: str
    threshold: float
    hold_seconds: int = 0
    page: bool = False


def rule_words(rule: RuleWords, *, with_session: bool = True) -> str:
    """`reward < 0.2 for 10 min, pages on-call` (on `*`: every session here)."""
    op = escape(rule.op) if rule.op in OPS else "?"
    text = f"`{inert(rule.metric, MAX_METRIC)} {op} {rule.threshold:g}`"
    if rule.hold_seconds:
        text += f" for {_held(timedelta(seconds=rule.hold_seconds))}"
    if rule.page:
        text += ", pages on-call"
    if with_session:
        where = "every session here" if rule.session_id == "*" else code_span(rule.session_id, 80)
        text += f" on {where}"
    return text


def _held(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    return f"{seconds} s" if seconds < 60 else duration_words(delta)


def _number(value: float) -> str:
    return f"{value:.4g}"


def rule_alert(
    session_label_text: str,
    rule: RuleWords,
    *,
    value: float,
    step: float | None,
    held: timedelta,
    mention: str | None = None,
    permalink: str | None = None,
) -> Message:
    """`reward is 0.13 at step 1,200 (rule reward < 0.2 for 10 min), for 12 min`."""
    name = inert(rule.metric, MAX_METRIC)
    at = f" at step {int(step):,}" if step is not None and step == int(step) else ""
    if step is not None and step != int(step):
        at = f" at step {step:g}"
    lasted = f", for {_held(held)}" if held.total_seconds() >= 1 else ""
    words = f"`{name}` is {_number(value)}{at}{lasted}"
    lead = f"{safe_mention(mention)} " if mention else ""
    text = f"{lead}:rotating_light: {words} in {session_label_text}."
    blocks = [
        section_block(text),
        context_block(f"Rule: {rule_words(rule, with_session=False)}"),
    ]
    link = safe_link(permalink, "View thread")
    if link is not None:
        blocks.append(section_block(link))
    return message_of(f"{words} ({session_label_text})", blocks)


def forecast_words(
    spent: float,
    amount: float,
    *,
    per_hour: float | None,
    reaches_at: datetime | None,
    currency: str,
    now: datetime,
) -> str:
    """`$163 of $200; at $12.50/h it reaches $200 at 14:30 UTC` (on another day
    than `now`'s: `tomorrow, 4 Dec, at 04:00 UTC`, `on 6 Dec at …`, `on 3 May 2027 at …`)."""
    of = f"{money_words(spent, currency)} of {money_words(amount, currency)}"
    rate = money_words(per_hour, currency) if per_hour else None
    if rate is None:
        return f"{of}; not billing now"
    if reaches_at is None:
        return f"{of}; at {rate}/h"
    return f"{of}; at {rate}/h it reaches {money_words(amount, currency)} {_when(reaches_at, now)}"


def _when(at: datetime, now: datetime) -> str:
    """`at 14:30 UTC` today (UTC's day, as the time is), else with the date."""
    at, now = _utc(at), _utc(now)
    clock = f"at {at:%H:%M} UTC"
    if at.date() == now.date():
        return clock
    day = f"{at.day} {at:%b}" + (f" {at.year}" if at.year != now.year else "")
    if at.date() == now.date() + timedelta(days=1):
        return f"tomorrow, {day}, {clock}"
    return f"on {day} {clock}"


def _utc(dt: datetime) -> datetime:
    """Naive UTC (naive times are UTC already)."""
    return dt.astimezone(UTC).replace(tzinfo=None) if dt.tzinfo is not None else dt


def budget_alert(
    what: str,
    *,
    level: int,
    spent: float,
    amount: float,
    per_hour: float | None,
    reaches_at: datetime | None,
    currency: str,
    now: datetime,
    others: Mapping[str, float] | None = None,
    mention: str | None = None,
    permalink: str | None = None,
) -> Message:
    """A budget at 80 % or 100 % (`what`: the session's label or "this channel
    today"), with when it reaches the amount at the current rate, and what was
    spent in `others` currencies, never added to it."""
    emoji = ":money_with_wings:" if level >= 100 else ":warning:"
    reached = "has reached its budget" if level >= 100 else f"is at {level} % of its budget"
    forecast = forecast_words(
        spent, amount, per_hour=per_hour, reaches_at=reaches_at, currency=currency, now=now
    )
    apart = other_currencies(others or {})
    lead = f"{safe_mention(mention)} " if mention else ""
    blocks = [section_block(f"{lead}{emoji} {what} {reached}: {forecast}.{apart}")]
    link = safe_link(permalink, "View thread")
    if link is not None:
        blocks.append(section_block(link))
    blocks.append(context_block("Estimated spend: price × the READY time the bot saw."))
    return message_of(f"{what} {reached}: {forecast}" + (f".{apart}" if apart else ""), blocks)


def other_currencies(others: Mapping[str, float]) -> str:
    """` Also spent today, not added (budgets are in dollars): 85.00 EUR.` or nothing."""
    amounts = [money_words(v, code) for code, v in sorted(others.items()) if v > 0]
    shown = [a for a in amounts if a is not None]
    if not shown:
        return ""
    return f" Also spent today, not added (budgets are in dollars): {', '.join(shown)}."


def rules_list(rules: Sequence[RuleWords], budgets: Sequence[str]) -> Message:
    """`alerts`: the channel's rules and budgets, only to the person who asked;
    every one of them, in as many sections as they take (a channel holds at
    most 20 rules and 50 budgets, which fit a message's blocks many times)."""
    rule_lines = [f"• {rule_words(r)}" for r in rules] or ["No metric rules in this channel."]
    budget_lines = [f"• {b}" for b in budgets] or ["No budgets in this channel."]
    blocks = [
        *_sections("*Rules in this channel*", rule_lines),
        *_sections("*Budgets in this channel*", budget_lines),
    ]
    if len(blocks) > MAX_BLOCKS:  # beyond the caps: say what is left out, never drop it silently
        blocks[MAX_BLOCKS - 1 :] = [section_block("…and more than one message can hold.")]
    return message_of(_listed(len(rules), len(budgets)), blocks)


def _listed(rules: int, budgets: int) -> str:
    """`1 rule and 2 budgets`; `No rules or budgets`."""
    if not rules and not budgets:
        return "No rules or budgets"
    left = count_words(rules, "rule") if rules else "No rules"
    right = count_words(budgets, "budget") if budgets else "no budgets"
    return f"{left} and {right}"


def _sections(title: str, lines: Sequence[str]) -> list[dict[str, Any]]:
    """`title` and `lines` in sections of at most MAX_SECTION_TEXT characters,
    a line never split (one longer than a section is cut)."""
    sections: list[str] = []
    text = title
    for line in lines:
        line = truncate(line, MAX_SECTION_TEXT - 1)
        if slack_len(text) + 1 + slack_len(line) > MAX_SECTION_TEXT:
            sections.append(text)
            text = line
        else:
            text = f"{text}\n{line}"
    sections.append(text)
    return [section_block(t) for t in sections]


def budgets_full(limit: int) -> str:
    """A channel that holds `limit` budgets, the most it may, is refused another."""
    return (
        f":no_entry_sign: This channel already has {limit} budgets, the most it may "
        "hold: remove one with `/rl-session budget &lt;id&gt; off` (the daily one: "
        "`budget * off`), or change one it has."
    )


def budget_words(session_id: str, amount: float, *, daily: bool) -> str:
    """`budget $200 on `abc`` or `budget $500 a day over every session here`."""
    money = money_words(amount, "USD") or f"${amount:g}"
    if daily:
        return f"budget {money} a day over every session here"
    return f"budget {money} on {code_span(session_id, 80)}"


def rules_removed(removed: int) -> str:
    return f":white_check_mark: Removed {removed} rule{'s' if removed != 1 else ''}."


def rules_full(limit: int) -> str:
    """A channel that holds `limit` rules, the most it may, is refused another."""
    return (
        f":no_entry_sign: This channel already has {limit} rules, the most it "
        "may hold: remove one with `/rl-session alert &lt;id&gt; off [&lt;metric&gt;]`."
    )


def rule_added(rule: RuleWords) -> str:
    return (
        f":white_check_mark: Rule {rule_words(rule)}: told once per crossing in the session's "
        "thread here (muted threads stay quiet)."
    )


def budget_removed(gone: bool) -> str:
    return ":white_check_mark: Budget removed." if gone else "There was no such budget."


def budget_set(
    session_id: str, amount: float, *, daily: bool, priced_in: Collection[str] = ()
) -> str:
    """The answer to `budget`; `priced_in`: the other currencies the spend it
    covers is known to be priced in, which it never adds or compares."""
    words = budget_words(session_id, amount, daily=daily)
    answer = f":white_check_mark: Set a {words}: told at 80 % and 100 % of it."
    codes = sorted({inert(c, 10) for c in priced_in})
    if not codes:
        return answer
    listed = " and ".join([", ".join(codes[:-1]), codes[-1]] if len(codes) > 1 else codes)
    if daily:
        return (
            f"{answer} Budgets are in dollars: spend of sessions here priced in {listed} "
            "is not added to it."
        )
    return (
        f"{answer} Budgets are in dollars and this session's resource is priced in "
        f"{listed}: its spend is not compared with this budget."
    )
