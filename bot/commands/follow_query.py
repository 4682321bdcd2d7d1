"""The follow rule a person asked for, and whose sessions it means.

`follow mine|@user|all [model=<name>] [status] [checkpoints] [errors-only]
[stall=…] [existing]` (grammar in `bot.commands.parser`) makes one; `unfollow
mine|@user|all [model=<name>]` removes it. `mine` and `@user` name a Slack
user, mapped to Together's `created_by` through CREATED_BY_USER_MAP. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bot.subscriptions.options import DEFAULT_FILTERS, ThreadOptions

#: the selector that takes every session the API key can see
EVERYONE = "all"
#: a rule that names no filters and no stall threshold
_PLAIN_RULE = ThreadOptions(filters=DEFAULT_FILTERS)


@dataclass(frozen=True)
class FollowSpec:
    """A rule as asked for: `who` is "mine", a Slack user id or "all"."""

    who: str
    model: str | None = None
    #: what each thread the rule makes is given: its filters and stall threshold
    options: ThreadOptions = _PLAIN_RULE
    existing: bool = False

    def selector(self, caller: str) -> str:
        """What the rule stores: "all", or the Slack user whose sessions it takes."""
        return caller if self.who == "mine" else self.who


def together_users(slack_user: str, user_map: Mapping[str, str]) -> list[str]:
    """The Together user ids CREATED_BY_USER_MAP maps to this Slack user."""
    return sorted(together for together, slack in user_map.items() if slack == slack_user)
