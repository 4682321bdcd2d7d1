"""What the bot answers a person: usage, notices, the channel's list, the
thread lines that say who did what, and the App Home tab."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from bot.rendering.blocks import (
    HOME_UNSUBSCRIBE,
    MAX_BLOCKS,
    MAX_SECTION_TEXT,
    Message,
    button,
    context_block,
    header_block,
    message_of,
    section_block,
)
from bot.rendering.notifications import SessionLine, session_lines
from bot.rendering.text import (
    ID_LIMIT,
    NAME_LIMIT,
    code_span,
    escape,
    inert,
    safe_link,
    slack_len,
    user_ref,
)
from bot.rendering.words import slack_date, status_emoji, status_words
from bot.training.sessions import TrainingSession

_CHANNEL_ID_RE = re.compile(r"[CG][A-Z0-9]{2,20}")
_MAX_LIST_ROWS = 100
_MAX_HOME_ROWS = 20
OPTION_LIMIT = 40


class ListedSubscription(NamedTuple):
    """One row of `/rl-session list`."""

    session_id: str
    display_name: str | None
    last_status: str | None  # None: not polled yet
    permalink: str | None = None  # the thread, when known
    filters: frozenset[str] = frozenset()
    muted_until: datetime | None = None  # set only while muted
    options: tuple[str, ...] = ()  # the thread's own options, as typed (`stall=30m`)


class HomeSubscription(NamedTuple):
    """One of a user's subscriptions on their App Home tab."""

    subscription_id: int
    channel_id: str
    session_id: str
    display_name: str | None
    last_status: str | None


_USAGE = [
    ("/rl-session <id>", "show a training session's card"),
    (
        "/rl-session subscribe <id> [status] [checkpoints] [errors-only] [stall=30m|off] "
        "[target=2000] [broadcast=errors|ends|all|off] [dm=creator|off] [chart=end|off]",
        "post the card here and follow it (default: status changes; a stalled step "
        "is told after the time your operator set, unless `stall=` says otherwise; `broadcast=` "
        "shows those replies in the channel too; `dm=creator` DMs the session's creator "
        "its errors, stalls and idle resources; a final chart when it ends unless `chart=off`)",
    ),
    (
        "/rl-session chart <id> [metric …]",
        "a chart into this channel's thread of it: its W&B metrics, or `progress`",
    ),
    ("/rl-session unsubscribe <id>", "stop following it in this channel"),
    (
        "/rl-session mute <id> <duration>",
        "pause this channel's updates, e.g. 2h (errors still page on-call)",
    ),
    ("/rl-session unmute <id>", "resume them now"),
    ("/rl-session digest on HH:MM [Area/City]", "a daily summary here (`digest off` stops it)"),
    (
        "/rl-session follow mine|@user|all [model=<name>] [filters] [stall=30m] [existing]",
        "subscribe here to every new session of yours, theirs or everyone's (`existing`: "
        "the live ones too)",
    ),
    ("/rl-session unfollow mine|@user|all [model=<name>]", "remove that rule"),
    (
        "/rl-session alert <id>|* <metric> <op> <value> [for 10m] [page]",
        "tell the thread when a W&B metric (or `steps_per_min`) crosses a threshold; "
        "`alert &lt;id&gt;|* off [&lt;metric&gt;]` removes, `alerts` lists (at most 20 a channel)",
    ),
    (
        "/rl-session budget <id> $<amount> | budget * $<amount>/day",
        "warn at 80 % and 100 % of a session's (or this channel's daily) estimated spend",
    ),
    ("/rl-session list", "this channel's subscriptions and follow rules"),
    (
        "/rl-session ls [running|creating|error|all] [mine|@user] [model=<name>]",
        "the org's sessions, only to you (default: running), 100 to a page",
    ),
    ("/rl-session help", "this message"),
]


def help_message() -> Message:
    """Usage naming every form of the command."""
    lines = [f"• `{escape(form)}` — {what}" for form, what in _USAGE]
    text = "*rl-bot shows Together RL training sessions.*\n" + "\n".join(lines)
    fallback = "rl-bot usage: " + "; ".join(escape(form) for form, _ in _USAGE)
    return message_of(fallback, [section_block(text)])


def notice(text: str) -> Message:
    """A one-section reply for errors or info the bot itself writes; the text is
    ours and already mrkdwn, so it is cut but not escaped."""
    return _said(text.strip() or "(no details)")


def _said(text: str) -> Message:
    """One section that says `text`, which is also the fallback."""
    return message_of(text, [section_block(text)])


def _listed_line(row: ListedSubscription) -> str:
    if row.last_status is None:
        status = f"{status_emoji('')} not checked yet"
    else:
        status = f"{status_emoji(row.last_status)} {status_words(row.last_status)}"
    name = inert(row.display_name, NAME_LIMIT, default="")
    session_id = code_span(row.session_id, ID_LIMIT)
    parts = [f"*{name}* {session_id}" if name else session_id, status]
    link = safe_link(row.permalink, "thread")
    if link:
        parts.append(link)
    if row.filters:
        parts.append("filters: " + ", ".join(sorted(row.filters)))
    if row.muted_until is not None:
        parts.append(f"muted until {slack_date(row.muted_until)}")
    if row.options:
        parts.append(" ".join(code_span(option, OPTION_LIMIT) for option in row.options))
    return " · ".join(parts)


def subscription_list(rows: Sequence[ListedSubscription]) -> Message:
    """This channel's subscriptions, packed into as few sections as fit."""
    if not rows:
        return notice(
            f"This channel has no subscriptions. Use `{escape('/rl-session subscribe <id>')}`."
        )
    lines = [_listed_line(row) for row in rows[:_MAX_LIST_ROWS]]

    count = len(rows)
    blocks: list[dict[str, Any]] = [
        header_block(f"Subscriptions in this channel ({count})"),
    ]
    sections: list[str] = []
    current: list[str] = []
    placed = 0
    room = MAX_BLOCKS - 2  # the header and the "and N more" context
    for line in lines:
        if current and slack_len("\n".join([*current, line])) > MAX_SECTION_TEXT:
            sections.append("\n".join(current))
            placed += len(current)
            current = []
            if len(sections) >= room:
                break
        current.append(line)
    if current:
        sections.append("\n".join(current))
        placed += len(current)
    blocks += [section_block(text) for text in sections]
    if placed < count:
        blocks.append(context_block(f"…and {count - placed} more"))
    noun = "subscription" if count == 1 else "subscriptions"
    return message_of(f"This channel has {count} {noun}.", blocks)


def unsubscribed_message(user_id: str) -> Message:
    """Said in the channel so everyone knows why updates stopped, and who."""
    text = f"{user_ref(user_id)} unsubscribed this channel; no further updates here."
    return _said(text)


def muted_message(user_id: str, until: datetime) -> Message:
    """Said in the thread and to the user who muted it."""
    text = (
        f":zipper_mouth_face: {user_ref(user_id)} muted this thread until {slack_date(until)}. "
        "Updates resume then; errors still reach on-call."
    )
    return _said(text)


def unmuted_message(user_id: str) -> Message:
    text = f":loud_sound: {user_ref(user_id)} unmuted this thread; updates resume now."
    return _said(text)


def stop_requested_message(user_id: str, session: TrainingSession) -> Message:
    text = (
        f":octagonal_sign: {user_ref(user_id)} asked Together to stop this session. "
        f"Together says it is now {status_words(session.status).lower()}."
    )
    return _said(text)


#: a stop Together accepted, whose new state could not be read
ACCEPTED_UNREAD = "Together accepted the stop; its new state could not be read just now."


def stop_accepted_message(user_id: str, session_id: str, *, subscribed: bool) -> Message:
    """Who stopped it, when Together accepted the stop but its state could not be
    read: a subscription's poller shows the change in its thread; elsewhere the
    person can ask for the card."""
    then = (
        "It is being confirmed: the subscription's thread is updated when it changes."
        if subscribed
        else f"Run {code_span(f'/rl-session {session_id}', ID_LIMIT)} to see it."
    )
    return notice(
        f":octagonal_sign: {user_ref(user_id)} asked Together to stop this session. "
        f"{ACCEPTED_UNREAD} {then}"
    )


def resource_stop_accepted_message(user_id: str, resource_id: str) -> Message:
    """Who stopped a model resource, when Together accepted but its state could not be read."""
    return notice(
        f":octagonal_sign: {user_ref(user_id)} asked Together to stop model resource "
        f"{code_span(resource_id, ID_LIMIT)}. {ACCEPTED_UNREAD}"
    )


def home_view(
    subscriptions: Sequence[HomeSubscription], created: Sequence[SessionLine]
) -> dict[str, Any]:
    """The App Home tab: your subscriptions across channels, and the watched
    sessions you created."""
    blocks: list[dict[str, Any]] = [header_block("Your training-session subscriptions")]
    if not subscriptions:
        blocks.append(
            section_block(
                f"You have no subscriptions. Use `{escape('/rl-session subscribe <id>')}` "
                "in a channel."
            )
        )
    for sub in subscriptions[:_MAX_HOME_ROWS]:
        label = inert(sub.display_name, NAME_LIMIT, default="") or code_span(
            sub.session_id, ID_LIMIT
        )
        status = sub.last_status
        state = f"{status_emoji(status)} {status_words(status)}" if status else "not checked yet"
        channel = sub.channel_id
        channel_ref = f"<#{channel}>" if _CHANNEL_ID_RE.fullmatch(channel) else inert(channel, 40)
        block = section_block(f"*{label}* in {channel_ref} · {state}")
        block["accessory"] = button("Unsubscribe", HOME_UNSUBSCRIBE, value=str(sub.subscription_id))
        blocks.append(block)
    if len(subscriptions) > _MAX_HOME_ROWS:
        blocks.append(context_block(f"…and {len(subscriptions) - _MAX_HOME_ROWS} more"))
    blocks.append({"type": "divider"})
    blocks.append(header_block("Sessions you created"))
    if created:
        blocks.append(section_block(session_lines(created, 30)))
    else:
        blocks.append(
            context_block(
                "None that the bot is watching (or it does not know your Together user: "
                "ask your operator to map it to your Slack user)."
            )
        )
    return {"type": "home", "blocks": blocks[:MAX_BLOCKS]}
