"""The short answers the listeners give a person: what a command or a button did,
and why a click could not be acted on. Session ids here are well-formed already
(the parser and the buttons' checks let no other through), so they are shown as
given, in code spans."""

from __future__ import annotations

# -- clicks that cannot be acted on ---------------------------------------------------------------

NOWHERE = "I could not tell where that click came from."
NOT_A_RESOURCE_ID = "That is not a model resource id."
OUT_OF_DATE_BUTTON = "That button is out of date or was not made by me. Run `/rl-session ls` again."
NOT_MY_ALERT = "That button is not one of my alerts'."
NOT_MY_CHECKPOINT = "That button does not name a checkpoint of mine."
NOT_A_SUBSCRIPTION = "That button does not name a subscription."
NOT_ON_OR_OFF = "That button does not say on or off."

# -- what a command or a click did ----------------------------------------------------------------

ALREADY_SUBSCRIBED_HERE = "This channel is already subscribed; updates go in its thread."
NOT_SUBSCRIBED_TO_THAT = "This channel is not subscribed to that session."
KEPT_UP = ":hourglass_flowing_sand: Kept up for another hour."
DIGEST_OFF = ":white_check_mark: The daily digest for this channel is off."


def subscribed_by(user_id: str, session_id: str) -> str:
    """The Subscribe button's answer, in the channel: who subscribed it."""
    return f":white_check_mark: <@{user_id}> subscribed this channel to `{session_id}`."


def subscribed(session_id: str, what: str, *, already: bool, changed: bool) -> str:
    """`subscribe`'s answer: the thread's filters and options (`what`) now, or that
    nothing changed."""
    if changed:
        return f":white_check_mark: Filters for `{session_id}` in this channel are now: {what}."
    if already:
        return f"This channel is already subscribed to `{session_id}`; updates go in its thread."
    return (
        f":white_check_mark: Subscribed ({what}). Updates of `{session_id}` will be told "
        "in the thread of the card I just posted."
    )


def unsubscribed(session_id: str) -> str:
    return f":white_check_mark: Unsubscribed this channel from `{session_id}`."


def not_muted(session_id: str) -> str:
    return f"This channel's updates of `{session_id}` are not muted."


def not_subscribed(session_id: str) -> str:
    return f"This channel is not subscribed to `{session_id}`."


def digest_at(at: str, zone: str) -> str:
    return (
        f":white_check_mark: This channel gets a daily digest at {at} "
        f"({zone}). `/rl-session digest off` stops it."
    )
