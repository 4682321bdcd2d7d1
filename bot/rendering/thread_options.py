"""The words a `subscribe` answer gives for the thread's options (`stall=`,
`target=`, `chart=`, `broadcast=`, `dm=`), including the warning that a creator
without a CREATED_BY_USER_MAP entry cannot be DMed until an operator adds one.
Pure: the caller reads the options and looks the creator up."""

from __future__ import annotations

from bot.rendering.text import VALUE_LIMIT, code_span, user_ref

BROADCAST_WORDS = {
    "errors": "errors also shown in the channel",
    "ends": "the session's end (and errors) also shown in the channel",
    "all": "every thread reply also shown in the channel",
    "off": "nothing shown in the channel beyond the card",
}


def option_words(
    *, stall_minutes: int | None, target_step: int | None, chart_on_end: bool | None
) -> str:
    """`, stalled after 30 min without progress, …` for the options given beyond
    the filters and the routing (None: not given); "" when none was."""
    words = ""
    if stall_minutes is not None:
        words += (
            ", stall alerts off"
            if stall_minutes == 0
            else f", stalled after {stall_minutes} min without progress"
        )
    if target_step is not None:
        words += f", target step {target_step:,} (the card shows an ETA)"
    if chart_on_end is not None:
        words += ", a final chart when it ends" if chart_on_end else ", no final chart"
    return words


def routing_words(
    *, broadcast: str | None, dm: str | None, creator: str, creator_slack_user: str | None
) -> str:
    """`, errors also shown in the channel, DMs to <@U…>` for the routing given
    (`dm` "" is off, None not given); "" when none was. `creator` is the
    session's `created_by`, `creator_slack_user` the Slack user it maps to."""
    words = ""
    if broadcast is not None:
        words += f", {BROADCAST_WORDS.get(broadcast, broadcast)}"
    if dm == "":
        words += ", no DMs to the creator"
    elif dm is not None:
        if creator_slack_user:
            words += (
                f", DMs to the creator {user_ref(creator_slack_user)} when it errors, "
                "stalls or idles"
            )
        else:
            words += (
                f", DMs to the creator once your operator pairs the Together user "
                f"{code_span(creator or '(unknown)', VALUE_LIMIT)} with a Slack member ID; "
                "none until then"
            )
    return words
