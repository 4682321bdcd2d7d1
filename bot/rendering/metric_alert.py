"""A watched W&B metric that became NaN or infinite, in words (pure): told once
in the thread ("loss became NaN at step 812"), and to on-call when asked."""

from __future__ import annotations

from bot.rendering.blocks import Message, message_of, section_block
from bot.rendering.text import inert, safe_link, safe_mention

MAX_METRIC = 80


def metric_alert(
    session_label_text: str,
    metric: str,
    value: str,
    step: float | None,
    *,
    mention: str | None = None,
    permalink: str | None = None,
) -> Message:
    """`value` is the name W&B gives it: NaN, Infinity or -Infinity."""
    name = inert(metric, MAX_METRIC)
    where = f" at step {int(step):,}" if step is not None and step == int(step) else ""
    if step is not None and step != int(step):
        where = f" at step {step:g}"
    lead = f"{safe_mention(mention)} " if mention else ""
    words = f"`{name}` became {inert(value, 12)}{where}"
    text = f"{lead}:warning: {words} in {session_label_text}'s W&B run."
    blocks = [section_block(text)]
    link = safe_link(permalink, "View thread")
    if link is not None:
        blocks.append(section_block(link))
    return message_of(f"{words} ({session_label_text})", blocks)
