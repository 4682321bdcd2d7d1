"""List passes: every session of some statuses, page by page, shared in a cycle.

A pass follows Together's cursor (`meta.next_cursor`) until the last page, a
page limit, a cursor that comes round again, or a failed page. It says which of
those ended it: a pass that did not reach the end (`complete` False) lists
some sessions, never all, so a session missing from it is not known to have
ended; only a direct GET says that.

`Lister` (one per process, in the `Runtime`) holds the last pass of each status
set for the length of a cycle and `SHARE_SECONDS` after it began, so every
consumer in this process that wants the same pages in that time shares one pass
(and callers that ask while it runs wait for it): the poller's live statuses,
the org-wide error watch's ERROR, and `ls`, which takes a complete pass of the
same or more statuses (`covering`) and filters it. The poller also takes the
final state of a watched session that left the live list from the error
watch's ERROR pass when it is listed there (`held`): presence in a page is
direct evidence, and ERROR is final.

Each pass also leaves a `Roster`: who created each listed session, of which base
model, when, and its status (a few strings a session, kept after the pass itself
is let go). Follow rules discover new sessions from the roster of the poller's
pass of the live statuses, so they make a pass of their own only when none ran.

A pass's requests are charged to whoever began it, and wait for that one's
share of the request budget: a caller never waits for a pass a lower tier
began (`bot.together.shares`), it makes its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from bot.together.answers import raw_sessions
from bot.together.budget import consumer
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.together.poll_plan import PAGE_SIZE
from bot.together.shares import Tier, tier_of
from bot.training.sessions import RawSession, TrainingSession, session_of_text
from bot.training.status import STATUS_PREFIX

log = logging.getLogger(__name__)

_RANK = {tier: n for n, tier in enumerate(Tier)}

# How long after it began a pass is still fresh enough for another consumer (`ls`).
SHARE_SECONDS = 5.0
# The longest a pass waits for the next page's request to leave before reading a page.
SEND_WAIT = 0.05


class Listed(NamedTuple):
    """What a roster keeps of one listed session: what a follow rule matches on."""

    id: str
    status: str  # full name, TRAINING_SESSION_STATUS_…
    created_by: str | None
    base_model: str | None
    created_at: datetime | None


@dataclass(frozen=True)
class Roster:
    """Who is in a pass: the listed sessions' `Listed` heads, in list order."""

    at: float
    complete: bool
    listed: tuple[Listed, ...]


@dataclass
class ListPass:
    """What one pass listed. Sessions are held as the JSON text they came as, a
    fifth of their size as models, and read back when asked for: a pass of
    thousands of sessions is held for a whole cycle."""

    pages: int = 0
    complete: bool = False
    # Rows on the pages that had a next page, and how many such pages: what a
    # page holds as this server sends it (the last page holds what is left).
    full_rows: int = 0
    full_pages: int = 0
    # The failure that cut the pass short, if one did.
    error: TogetherError | None = None
    at: float = 0.0
    _found: dict[str, bytes] = field(default_factory=dict)
    _status: dict[str, str] = field(default_factory=dict)
    _listed: dict[str, Listed] = field(default_factory=dict)

    def add(self, row: RawSession) -> None:
        head = row.head
        status = STATUS_PREFIX + head.status_enum.value
        self._found[row.id] = row.text
        self._status[row.id] = status
        self._listed[row.id] = Listed(
            row.id, status, head.created_by, head.base_model, head.created_at
        )

    def rows_per_page(self) -> float | None:
        """The rows a page held, as the server sent them; None when no page was
        followed by another (one page says nothing of a page's size)."""
        return self.full_rows / self.full_pages if self.full_pages else None

    def roster(self) -> Roster:
        """Who this pass listed, for the follow rules (outlives the pass's sessions)."""
        return Roster(self.at, self.complete and self.error is None, tuple(self._listed.values()))

    def ids_in(self, statuses: Sequence[str]) -> list[str]:
        """The listed sessions of `statuses` (full names), in list order."""
        wanted = frozenset(statuses)
        return [sid for sid, status in self._status.items() if status in wanted]

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._found

    def __len__(self) -> int:
        return len(self._found)

    def session(self, session_id: str) -> TrainingSession:
        return session_of_text(self._found[session_id])

    def row(self, session_id: str) -> RawSession:
        """The session as listed, its head read (the poller's form)."""
        return RawSession.from_text(self._found[session_id])

    def sessions(self) -> Iterator[TrainingSession]:
        return (session_of_text(raw) for raw in self._found.values())


async def list_pass(
    together: TogetherClient,
    statuses: Sequence[str],
    *,
    max_pages: int,
    clock: Callable[[], float] = time.monotonic,
    on_page: Callable[[list[RawSession]], Awaitable[None]] | None = None,
    created_by: str | None = None,
) -> ListPass:
    """Every session of `statuses` (of one creator, with `created_by`), at most
    `max_pages` pages, each asked for `PAGE_SIZE` rows (the server may send
    fewer); `on_page` sees each page as it comes. The next page loads meanwhile,
    and no further: a consumer that cannot keep up holds the pass back, so pages
    never pile up unconsumed."""
    out = ListPass(at=clock())
    cursors: set[str] = set()

    def ask(
        after: str | None, sent: asyncio.Event | None = None
    ) -> asyncio.Task[tuple[list[dict[str, Any]], str | None]]:
        return asyncio.create_task(
            together.list_session_rows(
                status=list(statuses),
                created_by=created_by,
                after=after,
                limit=PAGE_SIZE,
                sent=sent,
            )
        )

    # The next page is asked for as soon as this one's cursor is known, and this
    # one is parsed and handed over once that request has left: the pages' latency,
    # one after another, is the floor of a pass, and only that.
    loading = ask(None) if max_pages > 0 else None
    try:
        while loading is not None:
            try:
                rows, after = await loading
            except TogetherError as exc:
                log.warning("a list page failed (%s); the pass stops there", exc.kind)
                out.error = exc
                return out
            out.pages += 1
            if after:
                out.full_rows += len(rows)
                out.full_pages += 1
            loading = None
            going_round = after is not None and after in cursors
            if after and not going_round and out.pages < max_pages:
                cursors.add(after)
                sent = asyncio.Event()
                loading = ask(after, sent)
                await _until_sent(sent, loading)
            page = raw_sessions(rows)
            del rows
            for row in page:
                out.add(row)  # listed twice (it moved): the later copy
            if on_page is not None:
                await on_page(page)
            if not after:
                out.complete = True
                return out
            if going_round:  # a cursor going round: what was read is all there is
                log.warning("the list cursor came round again; the pass stops there")
                return out
    finally:
        if loading is not None:  # cancelled, or a consumer failed: the page is not wanted
            loading.cancel()
            if loading.done() and not loading.cancelled():
                loading.exception()  # retrieved: no "never retrieved" warning
    log.info("a list pass stopped at %d pages with more pages left", max_pages)
    return out


async def _until_sent(sent: asyncio.Event, loading: asyncio.Task[Any]) -> None:
    """Until the next page's request has left (or failed, or `SEND_WAIT` passed:
    held back by the rate limiter), so reading this page never delays it: the
    request's way out has several yields to the event loop, and this page's
    parsing and writing would run in each of them."""
    waiting = asyncio.ensure_future(sent.wait())
    try:
        await asyncio.wait(
            (waiting, loading), timeout=SEND_WAIT, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        waiting.cancel()


class Lister:
    """One list pass per status set per cycle, shared by whoever asks in that time."""

    def __init__(
        self, together: TogetherClient, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.together = together
        self.clock = clock
        self._last: dict[tuple[str, ...], ListPass] = {}
        self._running: dict[tuple[str, ...], asyncio.Task[ListPass]] = {}
        self._started: dict[tuple[str, ...], float] = {}
        self._pages: dict[tuple[str, ...], int] = {}
        self._rosters: dict[tuple[str, ...], Roster] = {}
        self._per_page: dict[tuple[str, ...], float] = {}
        # the budget tier of whoever began the running pass of each status set
        self._tier: dict[tuple[str, ...], Tier] = {}

    def pages_fetched(self, statuses: Sequence[str]) -> int:
        """Pages of `statuses` this process has asked Together for, in all."""
        return self._pages.get(tuple(sorted(statuses)), 0)

    async def get(
        self,
        statuses: Sequence[str],
        *,
        max_pages: int,
        since: float,
        on_page: Callable[[list[RawSession]], Awaitable[None]] | None = None,
    ) -> ListPass:
        """A pass of `statuses` begun at `since` (clock time) or later that went as
        far as `max_pages` (or to the end); a failed pass is never reused.
        `on_page` sees the pages of a pass this call begins (none of a shared one)."""
        key = tuple(sorted(statuses))
        last = self._last.get(key)
        if (
            last is not None
            and last.error is None
            and last.at >= since
            and (last.complete or last.pages >= max_pages)
        ):
            return last
        task = self._running.get(key)
        if task is not None and not self._may_wait_for(key):
            # begun by a lower tier of the request budget, its pages wait for that
            # tier's share: a pass of our own instead, not shared
            mine = asyncio.create_task(
                list_pass(
                    self.together, key, max_pages=max_pages, clock=self.clock, on_page=on_page
                )
            )
            mine.add_done_callback(lambda t: self._count(key, t))
            task = mine
        elif task is None:
            task = asyncio.create_task(
                list_pass(
                    self.together, key, max_pages=max_pages, clock=self.clock, on_page=on_page
                )
            )
            self._running[key] = task
            self._started[key] = self.clock()
            self._tier[key] = tier_of(consumer())
            task.add_done_callback(lambda _: self._running.pop(key, None))
            task.add_done_callback(lambda t: self._count(key, t))
        result = await asyncio.shield(task)
        self._last[key] = result
        return result

    def roster(self, statuses: Sequence[str], *, since: float) -> Roster | None:
        """Who the last finished pass of exactly `statuses` listed, if it began at
        `since` or later and was not cut short by a failure; kept after `forget`."""
        roster = self._rosters.get(tuple(sorted(statuses)))
        return roster if roster is not None and roster.at >= since else None

    def last_size(self, statuses: Sequence[str]) -> int | None:
        """How many sessions the last finished pass of `statuses` listed, however old."""
        roster = self._rosters.get(tuple(sorted(statuses)))
        return len(roster.listed) if roster is not None else None

    def last_per_page(self, statuses: Sequence[str]) -> float:
        """The rows a page of `statuses` held in the last pass that said (one with a
        page followed by another), however old; `PAGE_SIZE` before any did."""
        return self._per_page.get(tuple(sorted(statuses)), PAGE_SIZE)

    def forget(self, statuses: Sequence[str]) -> None:
        """Let go of the last pass of `statuses` (its sessions) once its cycle is over,
        or `SHARE_SECONDS` after it began if that is later (`ls` may still take it)."""
        key = tuple(sorted(statuses))
        last = self._last.get(key)
        if last is None:
            return
        left = last.at + SHARE_SECONDS - self.clock()
        if left <= 0:
            self._last.pop(key, None)
            return

        def drop() -> None:
            if self._last.get(key) is last:  # not a newer pass since
                self._last.pop(key, None)

        asyncio.get_running_loop().call_later(left, drop)

    async def held(self, statuses: Sequence[str], *, since: float) -> ListPass | None:
        """The pass of exactly `statuses` begun at `since` or later that this process
        holds or is running (waited for), cut short or not; None if there is none.
        Begins nothing: what another consumer listed anyway."""
        key = tuple(sorted(statuses))
        task = self._running.get(key)
        if task is not None and self._started.get(key, 0.0) >= since and self._may_wait_for(key):
            return await asyncio.shield(task)
        last = self._last.get(key)
        return last if last is not None and last.at >= since else None

    async def covering(self, statuses: Sequence[str], *, since: float) -> ListPass | None:
        """A complete pass begun at `since` or later of `statuses` or more (a superset:
        the caller keeps the statuses it wants), held or running; None if there is none."""
        wanted = frozenset(statuses)
        if not wanted:  # every status: no pass of some statuses covers it
            return None
        for key, task in list(self._running.items()):
            if (
                wanted <= frozenset(key)
                and self._started.get(key, 0.0) >= since
                and self._may_wait_for(key)
            ):
                result = await asyncio.shield(task)
                if result.complete and result.error is None:
                    return result
        for key, last in list(self._last.items()):
            if (
                wanted <= frozenset(key)
                and last.at >= since
                and last.complete
                and last.error is None
            ):
                return last
        return None

    def _may_wait_for(self, key: tuple[str, ...]) -> bool:
        """Whether the running pass of `key` was begun by the caller's tier of the
        request budget or a higher one: waiting for a lower tier's pages would make
        the caller wait for that tier's share."""
        begun_by = self._tier.get(key, Tier.PEOPLE)
        return _RANK[begun_by] <= _RANK[tier_of(consumer())]

    def _count(self, key: tuple[str, ...], task: asyncio.Task[ListPass]) -> None:
        if not task.cancelled() and task.exception() is None:
            done = task.result()
            self._pages[key] = self._pages.get(key, 0) + done.pages
            if (per_page := done.rows_per_page()) is not None:
                self._per_page[key] = per_page
            if done.error is None:
                self._rosters[key] = done.roster()
