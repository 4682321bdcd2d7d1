"""Follow rules in words: the answers to `follow` and `unfollow`, a channel's
rules in `list`, a person's rules and their "Tell me about my sessions" switch
in App Home, the messages discovery posts (a rule's cap reached, a rule
switched off, and why), and the personal DM's heading."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from bot.rendering.blocks import (
    HOME_PERSONAL,
    MAX_BLOCKS,
    Message,
    button,
    context_block,
    header_block,
    message_of,
    section_block,
)
from bot.rendering.text import code_span, inert
from bot.rendering.words import count_words

#: rules shown in a list or App Home (a channel holds 20 at most)
_MAX_RULES = 25


class RuleLine(NamedTuple):
    """A follow rule, as shown."""

    channel_id: str
    selector: str  # "all" or a Slack user id
    model: str  # "" for any
    filters: frozenset[str]
    stall_minutes: int | None
    existing: bool
    active: bool = True
    ended_reason: str | None = None


def rule_words(rule: RuleLine) -> str:
    """The rule as the command that makes it (mrkdwn, user text made inert)."""
    who = "all" if rule.selector == "all" else f"<@{inert(rule.selector, 32)}>"
    parts = [f"follow {who}"]
    if rule.model:
        parts.append(f"model={code_span(rule.model, 200)}")
    parts.append(", ".join(sorted(rule.filters)) or "status")
    if rule.stall_minutes is not None:
        parts.append("stall off" if rule.stall_minutes == 0 else f"stall={rule.stall_minutes}m")
    if rule.existing:
        parts.append("existing")
    return " ".join(parts)


def whose(selector: str, *, caller: str) -> str:
    """A rule's selector in words (mrkdwn)."""
    if selector == "all":
        return "every session the bot can see"
    return "your sessions" if selector == caller else f"<@{selector}>'s sessions"


def followed(selector: str, *, caller: str, model: str | None) -> str:
    """What a rule follows: whose sessions, of which base model (mrkdwn)."""
    return whose(selector, caller=caller) + (f" of `{model}`" if model else "")


def follow_duplicate(what: str) -> str:
    return (
        f":no_entry_sign: This channel already follows {what}. "
        "`/rl-session unfollow` it first to change its filters."
    )


def follow_cap_reached(count: int) -> str:
    return (
        f":no_entry_sign: This channel has {count} follow rules, the most it may "
        "have. `/rl-session unfollow` one first (`/rl-session list` shows them)."
    )


def following(what: str, filters: frozenset[str], *, existing: bool) -> str:
    """A rule stored: what it does, and when."""
    which = "every new session" + (" and the ones already live" if existing else "")
    return (
        f":white_check_mark: Following {what} here ({', '.join(sorted(filters))}): "
        f"{which} gets a card and a thread in this channel within a poll interval of "
        "appearing. `/rl-session unfollow` stops it; sessions already subscribed stay."
    )


def unfollowed(what: str, removed: int) -> str:
    """`removed` rules of a selector gone; its subscriptions stay."""
    if not removed:
        return f"This channel has no rule following {what}. `/rl-session list` shows its rules."
    noun = "rule" if removed == 1 else f"{removed} rules"
    return (
        f":white_check_mark: Removed the {noun} following {what}. Sessions it subscribed "
        "stay subscribed until their end or an `unsubscribe`."
    )


def rules_blocks(rules: Sequence[RuleLine]) -> list[dict[str, Any]]:
    """A channel's rules, appended to its `list`."""
    if not rules:
        return [context_block("No follow rules here. `/rl-session follow mine` adds one.")]
    lines = [f"• {rule_words(r)}" for r in rules[:_MAX_RULES]]
    return [
        header_block(f"Follow rules in this channel ({len(rules)})"),
        section_block("\n".join(lines)),
    ]


def with_rules(listed: Message, rules: Sequence[RuleLine]) -> Message:
    """`list`'s answer: the subscriptions, then the follow rules."""
    blocks = [*listed["blocks"], *rules_blocks(rules)]
    return {"text": listed["text"], "blocks": blocks[:MAX_BLOCKS]}


def home_blocks(
    rules: Sequence[RuleLine], *, switch_on: bool, mapped: bool
) -> list[dict[str, Any]]:
    """App Home's part: the person's rules in every channel, and their switch."""
    blocks: list[dict[str, Any]] = [{"type": "divider"}, header_block("Tell me about my sessions")]
    state = "on" if switch_on else "off"
    text = (
        f"*{state.capitalize()}.* A direct message for each of your sessions that errors, "
        "stalls, ends or leaves an idle model resource, with no channel needed."
    )
    section = section_block(text)
    if mapped or switch_on:
        label, value = ("Turn off", "off") if switch_on else ("Turn on", "on")
        section["accessory"] = button(label, HOME_PERSONAL, value=value)
    blocks.append(section)
    if not mapped:
        blocks.append(
            context_block(
                "I do not know your Together user, so I cannot tell which sessions are "
                "yours: ask your operator to pair your Together user id (the *Created by* "
                "on your sessions' cards) with your Slack member ID (*Profile → ⋮ → Copy "
                "member ID*)."
            )
        )
    blocks += [{"type": "divider"}, header_block("Your follow rules")]
    if not rules:
        blocks.append(context_block("None. `/rl-session follow mine` in a channel makes one."))
        return blocks
    lines = []
    for r in rules[:_MAX_RULES]:
        where = f"<#{inert(r.channel_id, 32)}>"
        state_words = "" if r.active else f" · _switched off: {inert(r.ended_reason, 200)}_"
        lines.append(f"• {rule_words(r)} in {where}{state_words}")
    blocks.append(section_block("\n".join(lines)))
    return blocks


def cap_message(
    rule: RuleLine, *, found: int, subscribed: int, failed: int, waiting: int, cap: int
) -> Message:
    """Said in the channel, once, when a rule found more new sessions than one pass
    takes: what it did with them, as it happened."""
    text = (
        f":warning: `{rule_words(rule)}` found {count_words(found, 'new session')} at once; "
        f"I subscribed {subscribed:,} and will take the {count_words(waiting, 'session')} left "
        f"in the next passes ({cap:,} a pass at most, within the Together request budget)."
    )
    if failed:
        text += (
            f" {count_words(failed, 'session')} could not be subscribed yet (Slack or Together "
            f"refused for now); I will try {'it' if failed == 1 else 'them'} again, less often "
            "each time."
        )
    return message_of(text, [section_block(text)])


#: why a channel's rules are switched off, by Slack's refusal of a post there
_GONE_WORDS = {
    "is_archived": "the channel is archived.",
    "channel_is_archived": "the channel is archived.",
    "not_in_channel": "I was removed from the channel.",
    "channel_not_found": "I can no longer see the channel.",
}


def gone_reason(error: str) -> str:
    """Why the bot can no longer post in a channel (`error`: Slack's code, one
    of those that say so), as stored with the rule and told to its creator."""
    return _GONE_WORDS[error]


def switched_off_message(rule: RuleLine, *, reason: str) -> Message:
    """Told to a rule's creator when the bot can no longer post in its channel."""
    text = (
        f":no_entry_sign: I switched off your rule {rule_words(rule)} in "
        f"<#{inert(rule.channel_id, 32)}>: {reason} Invite me back (or pick another "
        "channel) and run the `follow` again."
    )
    return message_of(text, [section_block(text)])


def personal_heading(message: Message, *, name: str) -> Message:
    """A personal DM: the alert as a thread would show it, headed as yours."""
    head = context_block(f"Your session {inert(name, 200)} (App Home: Tell me about my sessions)")
    return {"text": message["text"], "blocks": [head, *message["blocks"]][:MAX_BLOCKS]}
