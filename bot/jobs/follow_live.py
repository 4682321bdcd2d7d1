"""Who is live, for discovery (`bot.jobs.follow`).

The roster of a list pass of the live statuses another consumer made within the
last poll interval costs nothing; else discovery makes its own pass: one of
everyone, or, when no rule wants everyone and that saves requests, one
`created_by` pass per wanted creator (Together answering 403 to that filter
turns it off for this process). When its own passes fail, the next is made only
after a back-off, doubling up to a cap.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.jobs.follow_match import Wanted, creators_of, filter_saves
from bot.jobs.follow_retry import backoff
from bot.runtime import Runtime
from bot.together.list_pass import Listed, Lister, ListPass, list_pass
from bot.together.poll_plan import LIVE_STATUSES
from bot.training.sessions import TrainingSession

log = logging.getLogger(__name__)


@dataclass
class DiscoveryState:
    """What discovery keeps between runs in one process."""

    #: Together refused a `created_by` filter (403): list everyone from now on
    filter_refused: bool = False
    #: our own list passes failed this many runs in a row ...
    list_failures: int = 0
    #: ... and are not made again before this (the lister's clock)
    list_retry_at: float = -math.inf
    #: when this process last dropped the claims of sessions no longer live
    claims_pruned_at: float = -math.inf
    #: (person, session) a personal switch failed to watch: failures in a row, next try
    switch_failures: dict[tuple[str, str], tuple[int, float]] = field(default_factory=dict)


@dataclass
class Found:
    """What one run listed: who is live, and the full sessions when it listed them."""

    listed: list[Listed] = field(default_factory=list)
    passes: list[ListPass] = field(default_factory=list)
    #: the listing shows every live session (a pass of everyone that reached the end)
    everyone: bool = False

    def has(self, session_id: str) -> bool:
        """Whether a pass of this run listed the session whole (no GET needed)."""
        return any(session_id in done for done in self.passes)

    def session(self, session_id: str) -> TrainingSession | None:
        for done in self.passes:
            if session_id in done:
                return done.session(session_id)
        return None


async def live_sessions(
    rt: Runtime, *, lister: Lister, state: DiscoveryState, wanted: Sequence[Wanted]
) -> Found:
    """Who is live: the roster of a recent pass that reached the end, else a pass of
    our own (filtered by `created_by` only where that saves requests). After our
    own passes failed, none is made until its back-off has passed (nobody new is
    learned meanwhile, unless another consumer's pass shows them)."""
    settings = rt.settings
    now = lister.clock()
    roster = lister.roster(LIVE_STATUSES, since=now - settings.poll_interval_seconds)
    if roster is not None and roster.complete:  # one cut short did not show everyone
        return Found(listed=list(roster.listed), everyone=True)
    if now < state.list_retry_at:
        return Found()
    found = await _own_passes(rt, lister=lister, state=state, wanted=wanted)
    if any(done.error is not None for done in found.passes):
        state.list_failures += 1
        delay = backoff(state.list_failures, base=settings.poll_interval_seconds)
        state.list_retry_at = now + delay
        log.warning("discovery's list pass failed; the next in %.0f s", delay)
    else:
        state.list_failures, state.list_retry_at = 0, -math.inf
    return found


async def _own_passes(
    rt: Runtime, *, lister: Lister, state: DiscoveryState, wanted: Sequence[Wanted]
) -> Found:
    settings = rt.settings
    pages = settings.follow_max_pages
    creators = creators_of(wanted)
    if (
        not state.filter_refused
        and creators is not None
        and filter_saves(
            creators, lister.last_size(LIVE_STATUSES), lister.last_per_page(LIVE_STATUSES)
        )
    ):
        found = Found()
        for creator in sorted(creators):
            done = await list_pass(rt.together, LIVE_STATUSES, max_pages=pages, created_by=creator)
            if done.error is not None and done.error.status == 403:
                log.warning(
                    "Together refused the created_by filter (403); listing everyone instead"
                )
                state.filter_refused = True
                break
            found.passes.append(done)
            found.listed += done.roster().listed
        else:
            return found
    done = await lister.get(LIVE_STATUSES, max_pages=pages, since=lister.clock())
    roster = done.roster()
    return Found(listed=list(roster.listed), passes=[done], everyone=roster.complete)
