"""The `ls` query: the grammar of `/rl-session ls` and what its More button carries.

`ls [running|creating|error|all] [mine|@user] [model=<name>]` lists the
org's sessions from Together's list endpoint (100 to a page), answered only
to the caller. `mine` and `@user` map a Slack user to Together's `created_by`
through CREATED_BY_USER_MAP; `model=` keeps the rows of that base model. A
"More" button carries the query and Together's cursor, so the next page is
exactly the next page whoever clicks and however long after.

Pure: the page itself is fetched and drawn in `bot.commands.ls`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from bot.rendering.refusals import unlisted_creator
from bot.rendering.usage import LS_USAGE, unpicked_user
from bot.training.status import STATUS_PREFIX

StatusFilter = Literal["running", "creating", "error", "all"]
STATUS_FILTERS: tuple[str, ...] = get_args(StatusFilter)
DEFAULT_FILTER: StatusFilter = "running"
MAX_MODEL = 200
MAX_CURSOR = 1000
_STATUSES: dict[str, list[str]] = {
    "running": [STATUS_PREFIX + "RUNNING"],
    "creating": [STATUS_PREFIX + "CREATING"],
    "error": [STATUS_PREFIX + "ERROR"],
    "all": [],
}
# How Slack writes a user in a command's text: `<@U123|name>` (escaped) or `<@U123>`.
_USER_RE = re.compile(r"^<@([UW][A-Z0-9]{2,20})(?:\|[^<>]*)?>$")


@dataclass(frozen=True)
class ListQuery:
    status: StatusFilter = DEFAULT_FILTER
    #: "mine", a Slack user id, or None for everyone
    who: str | None = None
    model: str | None = None

    @property
    def statuses(self) -> list[str]:
        return list(_STATUSES[self.status])


def parse_args(args: Sequence[str]) -> ListQuery | str:
    """The words after `ls`: a query, or what is wrong (mrkdwn, user text not echoed)."""
    status: StatusFilter | None = None
    who: str | None = None
    model: str | None = None
    for word in args:
        lowered = word.lower()
        if lowered in STATUS_FILTERS:
            if status is not None:
                return f"Give one status filter at most. {LS_USAGE}"
            status = lowered  # type: ignore[assignment]
        elif lowered == "mine" or _USER_RE.fullmatch(word):
            if who is not None:
                return f"Give `mine` or one `@user` at most. {LS_USAGE}"
            match = _USER_RE.fullmatch(word)
            who = match.group(1) if match else "mine"
        elif lowered.startswith("model="):
            name = word[len("model=") :].strip()
            if model is not None or not name or len(name) > MAX_MODEL:
                return f"Give one `model=&lt;name&gt;` (at most {MAX_MODEL} characters). {LS_USAGE}"
            model = name
        elif word.startswith(("@", "<@")):
            return unpicked_user(word)
        else:
            return f"I did not understand that. {LS_USAGE}"
    return ListQuery(status or DEFAULT_FILTER, who, model)


def slack_user(word: str) -> str | None:
    """The Slack user id of a mention as a command's text carries it, else None."""
    match = _USER_RE.fullmatch(word)
    return match.group(1) if match else None


def creators(
    query: ListQuery, *, caller: str, user_map: Mapping[str, str]
) -> list[str] | str | None:
    """Together `created_by` ids the query means: None for everyone, or a
    refusal in words when the Slack user has no CREATED_BY_USER_MAP entry."""
    if query.who is None:
        return None
    slack_user = caller if query.who == "mine" else query.who
    ids = sorted(together for together, slack in user_map.items() if slack == slack_user)
    if ids:
        return ids
    return unlisted_creator(slack_user, mine=query.who == "mine")


# --- the More button ---------------------------------------------------------------------------


@dataclass(frozen=True)
class More:
    """What the More button carries: the query, the next page's cursor, and
    the number of the next row."""

    query: ListQuery
    after: str
    first_number: int


def more_value(more: More) -> str | None:
    """The button's value, or None when it would not fit (a huge cursor)."""
    if not more.after or len(more.after) > MAX_CURSOR:
        return None
    q = more.query
    return json.dumps(
        {"s": q.status, "w": q.who, "m": q.model, "a": more.after, "n": more.first_number},
        separators=(",", ":"),
    )


def read_more(value: str) -> More | None:
    """A More value back, checked like any user input (None if it is not ours)."""
    try:
        data = json.loads(value)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    status, who, model, after, number = (data.get(k) for k in ("s", "w", "m", "a", "n"))
    if status not in STATUS_FILTERS or not isinstance(after, str) or not after:
        return None
    if len(after) > MAX_CURSOR or not isinstance(number, int) or isinstance(number, bool):
        return None
    if who is not None and (
        not isinstance(who, str) or (who != "mine" and not _USER_RE.fullmatch(f"<@{who}>"))
    ):
        return None
    if model is not None and (not isinstance(model, str) or not 0 < len(model) <= MAX_MODEL):
        return None
    if not 1 <= number <= 10**9:
        return None
    return More(ListQuery(status, who, model), after, number)
