"""How to use a verb or an option, as the answers to a command that could not
be read say it (mrkdwn: `&lt;` and `&gt;` stand for the brackets Slack would read
as a link or a mention). The parsers in `bot.commands` choose which one."""

from __future__ import annotations

from bot.rendering.text import code_span

#: how much of a word typed is quoted back
_ECHO = 41

ALERT_USAGE = (
    "Use `alert &lt;id&gt;|* &lt;metric&gt; &lt;op&gt; &lt;value&gt; [for &lt;duration&gt;] [page]`, e.g. "
    "`alert &lt;id&gt; reward &lt; 0.2 for 10m page` (`op` is `&lt;`, `&lt;=`, `&gt;` or `&gt;=`; the metric is "
    "a W&B metric of the session's run, or `steps_per_min`), or `alert &lt;id&gt;|* off [&lt;metric&gt;]`."
)

BUDGET_USAGE = (
    "Use `budget &lt;id&gt; $&lt;amount&gt;` (the session's estimated spend), `budget * $&lt;amount&gt;/day` "
    "(the channel's daily spend over its sessions) or `budget &lt;id&gt;|* off`; amounts are "
    "positive, at most $1,000,000."
)

BROADCAST_USAGE = (
    "Give one `broadcast=` of `errors` (an error), `ends` (the session ending, errors "
    "included), `all` (every thread reply) or `off`: which thread replies are also "
    "shown in the channel."
)

CHART_USAGE = (
    "Use `chart &lt;id&gt; [metric …]`: up to 6 W&B metric names (letters, digits and `_ . / -`), "
    "or `progress` for the bot's own step chart. Without names: the metrics your operator chose."
)

CHART_USAGE_SUBSCRIBE = "Give `chart=end` (a final chart when the session ends) or `chart=off`."

DIGEST_USAGE = "Use `digest on HH:MM [Area/City]` (24-hour time, e.g. `digest on 09:00 Europe/Berlin`) or `digest off`."

DM_USAGE = (
    "Give `dm=creator` (the session's creator gets a DM when it errors, stalls or leaves "
    "an idle resource, once your operator has told the bot who they are in Slack) or `dm=off`."
)

FOLLOW_USAGE = (
    "Use `follow mine|@user|all [model=&lt;name&gt;] [status] [checkpoints] [errors-only] "
    "[stall=30m] [existing]`, e.g. `follow mine model=Qwen/Qwen3.5-4B errors-only`; "
    "`unfollow mine|@user|all [model=&lt;name&gt;]` removes it."
)

LS_USAGE = (
    "Use `ls [running|creating|error|all] [mine|@user] [model=&lt;name&gt;]`, "
    "e.g. `ls running mine` or `ls all model=Qwen/Qwen3.5-4B`."
)

STOP_BUTTON_USAGE = (
    "Stopping is a button, so that Slack asks you to confirm: press *Stop session* on the "
    "session's card (`/rl-session &lt;id&gt;` shows it) or *Stop* on its row of `ls`."
)

NAMES = "`&lt;id&gt;` may be a session's id or its name."

MUTE_USAGE = "Give a duration such as `30m`, `2h`, `1d` or `1h30m` (at most 30 days)."

STALL_USAGE = (
    "Give one `stall=` with a duration such as `30m` or `2h` (at most 30 days), or "
    "`stall=off`: how long a running session's step may stand still before this "
    "thread is told."
)

TARGET_USAGE = (
    "Give one `target=` with a whole step number such as `target=2000` (1 to 10^12): "
    "the card then shows when the session should reach it at the measured rate."
)


def unpicked_user(word: str) -> str:
    """`@ben` typed as text: Slack sends a person's id only when they are picked
    from its list (the same words for `ls`, `follow` and `unfollow`)."""
    return (
        f"I cannot tell who {code_span(word, _ECHO)} is: pick the person from Slack's list "
        "as you type `@`, so the command carries their user id."
    )
