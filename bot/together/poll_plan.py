"""The poll plan: how to learn the state of the due watched sessions for the
fewest Together requests, and how often the request budget lets us do it.

Two ways: one GET per session, or the list pages of the live statuses plus one
GET for each due session not read on them (it ended or vanished, or sits on a
page the pass did not reach; only a direct GET may say). Either way every due
session is learnt in the cycle that claimed it. Each cycle estimates both from
what the last list pass saw, pages as full as the server actually sent them
(asked for 100, a server may send fewer), and takes the cheaper. Pure:
numbers in, a choice out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from bot.training.status import STATUS_PREFIX, Status

# The rows a page is asked for; what a page holds is what the server sends.
PAGE_SIZE = 100
LIVE_STATUSES: tuple[str, ...] = tuple(
    STATUS_PREFIX + s.value for s in (Status.CREATING, Status.RUNNING, Status.STOPPING)
)
# The org-wide error watch's pages: a watched session listed there has ended in ERROR.
ERROR_STATUSES: tuple[str, ...] = (STATUS_PREFIX + Status.ERROR.value,)
# What a list pass saw is trusted this long; then the next cycle that could list
# looks again (a project's live count drifts, and a GET plan never lists).
ESTIMATE_TTL_SECONDS = 600.0


class Plan(StrEnum):
    GET = "get"
    LIST = "list"


@dataclass(frozen=True)
class Seen:
    """What the last list pass of the live statuses saw."""

    live: int  # sessions listed; a lower bound when the pass did not reach the end
    complete: bool  # the last page was reached
    missing: float  # share of the due sessions it was for that were not listed
    at: float  # when (monotonic seconds)
    per_page: float = PAGE_SIZE  # rows a page held, as the server sent them


def pages_for(live: int, per_page: float = PAGE_SIZE) -> int:
    return max(1, math.ceil(live / max(1.0, per_page)))


def list_cost(due: int, seen: Seen) -> int:
    """Requests of a list plan: the pages, and a GET for each session expected missing."""
    live = seen.live if seen.complete else seen.live + 1  # more than were seen
    return pages_for(live, seen.per_page) + math.ceil(due * seen.missing)


def choose(due: int, seen: Seen | None, *, now: float, forced: Plan | None = None) -> Plan:
    """The cheaper plan for `due` sessions; a tie goes to GETs (they run concurrently).

    With nothing (recent) seen, list: `max_pages` bounds what that look may
    cost, so a probe never spends more than twice what the GETs would have."""
    if forced is not None:
        return forced
    if due <= 1:
        return Plan.GET
    if seen is None or now - seen.at > ESTIMATE_TTL_SECONDS:
        return Plan.LIST
    return Plan.LIST if list_cost(due, seen) < due else Plan.GET


def max_pages(due: int) -> int:
    """A list pass never fetches more pages than the GETs it replaces."""
    return max(1, due - 1)


def justified_pages(watched: int, seen: Seen | None) -> int:
    """The most pages a pass of the live statuses may take for what is known of the
    project: the pages its sessions fill (the watched ones, or as many as the last
    pass listed), one more when that pass reached the end (the project grows),
    twice as many and one when it did not (still finding its size, at most
    doubling a cycle). A cursor that never ends costs no more than this."""
    per_page = seen.per_page if seen is not None else PAGE_SIZE
    pages = pages_for(max(watched, seen.live if seen is not None else 0), per_page)
    return pages + 1 if seen is not None and seen.complete else 2 * pages + 1


def budget_pages(
    *, requests_per_minute: float, others_per_minute: float, max_seconds: float
) -> int:
    """The most requests one round may take within the budget at the longest
    interval (`max_seconds`), after the other consumers' spend (at least one);
    unbounded when there is no budget (`requests_per_minute` 0)."""
    if requests_per_minute <= 0:
        return 1 << 30
    left = requests_per_minute - others_per_minute
    return max(1, int(left * max_seconds / 60.0))


def seen_after(
    *,
    listed: int,
    complete: bool,
    due: int,
    missing: int,
    at: float,
    before: Seen | None,
    per_page: float | None = None,
) -> Seen:
    """The estimate after a list pass. A pass cut short says nothing about how
    many of the due sessions are missing: the last estimate of that is kept.
    `per_page`: the rows a page held in this pass (None when no page was
    followed by another, so a page's size is not known): the last estimate, or
    `PAGE_SIZE`, is kept."""
    if complete:
        share = missing / due if due else 0.0
    else:
        share = before.missing if before is not None else 0.0
    if per_page is None:
        per_page = before.per_page if before is not None else PAGE_SIZE
    return Seen(live=listed, complete=complete, missing=share, at=at, per_page=max(1.0, per_page))


def round_cost(watched: int, seen: Seen | None, plan: Plan) -> int:
    """Requests to learn every watched session once with `plan` (a list plan with
    nothing seen yet: as if the project held only the watched sessions)."""
    if plan is Plan.LIST:
        return min(watched, list_cost(watched, seen) if seen else pages_for(watched))
    return watched


def budget_interval(
    cost: float,
    *,
    requests_per_minute: float,
    min_seconds: float,
    max_seconds: float,
    others_per_minute: float = 0.0,
) -> float:
    """The shortest interval at which `cost` requests a round fit what is left of
    the budget after the other consumers' recent spend (`others_per_minute`:
    commands, the org-wide watches), never below `min_seconds` nor above
    `max_seconds` (the latter wins)."""
    left = requests_per_minute - others_per_minute
    if left <= 0:
        return max_seconds
    wanted = cost * 60.0 / left
    return min(max_seconds, max(min_seconds, wanted))
