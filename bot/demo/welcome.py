"""The bot's first message in the demo's #rl-demo: what the next minutes bring and
what to try, so a newcomer does not meet an empty channel. Pure; the times are the
story's at speed 1, real minutes (`bot.demo.world`)."""

from __future__ import annotations

from typing import Any

_STORY = (
    "*In the next three minutes* (real minutes at ×1; *+1 min* and *Story speed* move only the "
    "sessions, the bot's timers keep real time):\n"
    "• `grpo-gsm8k-main` starts, steps and checkpoints, and is done at 2:24\n"
    "• `ppo-math-lr3e-5` fails at 0:48 and pages <#{oncall}>\n"
    "• `dpo-helpful-v2` stops stepping at 0:24: subscribe to it, and its thread hears "
    "it stalled a minute after its last step\n"
    "• `sft-warmup-done` is done, but its model is still up and billed: <#{oncall}> hears "
    "it is idle\n"
    "• `grpo-code-r1` logs reward and loss to W&B; the loss turns NaN at 1:00\n"
    "• ben's `rm-pairwise-07` appears at 0:30"
)
_TRY = (
    "*Try*: `/rl-session ls all`, then *Subscribe* on a row; *Chart*, *W&B run* and "
    "*Stop* on a card; `/rl-session help`. Switch person in *Acting as*: ben is on-call, "
    "gus may not press Stop."
)


def welcome_message(oncall: str) -> tuple[str, list[dict[str, Any]]]:
    """The message's fallback text and its blocks; `oncall` is the on-call channel's id."""
    head = ":wave: *Welcome to the rl-bot demo.* Slack, Together and W&B are simulated here; the bot is the real one."
    blocks = [
        {"type": "section", "text": {"type": "mrkdwn", "text": head}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _STORY.format(oncall=oncall)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _TRY}},
    ]
    return (
        "Welcome to the rl-bot demo: six training sessions play out in the next three minutes.",
        blocks,
    )
