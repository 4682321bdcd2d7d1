"""Which listed sessions a follow rule (or a personal switch) takes, and whether
a `created_by` filter would save requests. Pure: rosters and rules in, ids out.

A rule takes a live session (CREATING or RUNNING) that matches its selector and
model and appeared after the rule was made: Together's `created_at` is compared
with the rule's own time cut to the second, as Together gives whole seconds.
With `existing` it also takes the sessions already live. A personal switch
takes its person's live sessions, already live or new.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.together.list_pass import Listed
from bot.together.poll_plan import PAGE_SIZE, pages_for
from bot.training.status import STATUS_PREFIX, Status
from bot.training.time_bounds import naive_utc

#: the most new sessions one rule (or one person's switch) takes in one pass
MAX_NEW_PER_RULE = 50
#: a listed session in one of these may be followed (one stopping is on its way out)
FOLLOWABLE = frozenset(STATUS_PREFIX + s.value for s in (Status.CREATING, Status.RUNNING))
EVERYONE = "all"


@dataclass(frozen=True)
class Wanted:
    """A rule or a switch as discovery matches it. `creators` None: everyone."""

    creators: frozenset[str] | None
    model: str = ""
    since: datetime | None = None  # sessions created before this are left; None: any


def rule_wanted(
    *,
    selector: str,
    model: str,
    created_at: datetime,
    existing: bool,
    user_map: Mapping[str, str],
) -> Wanted | None:
    """What a stored rule takes; None when its user has no CREATED_BY_USER_MAP entry
    any more (the map changed since): it takes nothing until they have one."""
    creators = None
    if selector != EVERYONE:
        creators = frozenset(t for t, s in user_map.items() if s == selector)
        if not creators:
            return None
    since = None if existing else created_at.replace(microsecond=0)
    return Wanted(creators, model, since)


def personal_wanted(user_id: str, user_map: Mapping[str, str]) -> Wanted | None:
    """What a person's switch takes: their sessions, whenever made; None unmapped."""
    creators = frozenset(t for t, s in user_map.items() if s == user_id)
    return Wanted(creators) if creators else None


def takes(wanted: Wanted, listed: Listed) -> bool:
    if listed.status not in FOLLOWABLE:
        return False
    if wanted.creators is not None and listed.created_by not in wanted.creators:
        return False
    if wanted.model and (listed.base_model or "").casefold() != wanted.model.casefold():
        return False
    if wanted.since is not None:
        created = naive_utc(listed.created_at)
        if created is None or created < wanted.since:
            return False
    return True


def matching(wanted: Wanted, roster: Iterable[Listed]) -> list[str]:
    """The ids `wanted` takes, oldest first (a capped rule takes the oldest first)."""
    found = [r for r in roster if takes(wanted, r)]
    found.sort(key=lambda r: (naive_utc(r.created_at) or datetime.min, r.id))
    return [r.id for r in found]


def creators_of(wanted: Sequence[Wanted]) -> frozenset[str] | None:
    """Every creator the rules and switches want; None when one wants everyone."""
    out: set[str] = set()
    for w in wanted:
        if w.creators is None:
            return None
        out |= w.creators
    return frozenset(out)


def filter_saves(
    creators: frozenset[str] | None, last_size: int | None, per_page: float = PAGE_SIZE
) -> bool:
    """Whether one `created_by` pass per creator costs fewer requests than one pass
    of everyone: only with no `all` rule and a known project size (each filtered
    pass costs at least one page; the size of each creator's part is not known)."""
    if creators is None or last_size is None:
        return False
    return 0 < len(creators) < pages_for(last_size, per_page)
