"""List passes: every session of some statuses, page by page, shared in a cycle.

A pass follows Together's cursor (`meta.next_cursor`) until the last page, a
page limit, a cursor that comes round again, or a failed page. It says which of
those ended it: a pass that did not reach the end (`complete` False) lists
some sessions, never all, so a session missing from it is not known to have
ended; only a direct GET says that.

`Lister` holds the last pass of each status set for the length of a cycle, so
every consumer in this process that wants the same pages in that time shares
one pass (and callers that ask while it runs wait for it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field

from bot.models import TrainingSession
from bot.poll_plan import PAGE_SIZE
from bot.together import TogetherClient, TogetherError

log = logging.getLogger(__name__)


@dataclass
class ListPass:
    """What one pass listed. Sessions are held as compact JSON, a fifth of their
    size as models, and read back when asked for: a pass of thousands of sessions
    is held for a whole cycle."""

    pages: int = 0
    complete: bool = False
    # The failure that cut the pass short, if one did.
    error: TogetherError | None = None
    at: float = 0.0
    _found: dict[str, bytes] = field(default_factory=dict)

    def add(self, session: TrainingSession) -> None:
        self._found[session.id] = session.model_dump_json().encode()

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._found

    def __len__(self) -> int:
        return len(self._found)

    def session(self, session_id: str) -> TrainingSession:
        return TrainingSession.model_validate_json(self._found[session_id])

    def sessions(self) -> Iterator[TrainingSession]:
        return (TrainingSession.model_validate_json(raw) for raw in self._found.values())


async def list_pass(
    together: TogetherClient,
    statuses: Sequence[str],
    *,
    max_pages: int,
    clock: Callable[[], float] = time.monotonic,
    on_page: Callable[[list[TrainingSession]], Awaitable[None]] | None = None,
) -> ListPass:
    """Every session of `statuses`, at most `max_pages` pages of `PAGE_SIZE`;
    `on_page` sees each page as it comes, and the next page is asked for once it
    returns (a consumer that cannot keep up holds the pass back: pages never
    pile up unconsumed)."""
    out = ListPass(at=clock())
    after: str | None = None
    cursors: set[str] = set()
    while out.pages < max_pages:
        try:
            page, after = await together.list_sessions(
                status=list(statuses), after=after, limit=PAGE_SIZE
            )
        except TogetherError as exc:
            log.warning("a list page failed (%s); the pass stops there", exc.kind)
            out.error = exc
            return out
        out.pages += 1
        for session in page:
            out.add(session)  # listed twice (it moved): the later copy
        if on_page is not None:
            await on_page(page)
        if not after:
            out.complete = True
            return out
        if after in cursors:  # a cursor going round: what was read is all there is
            log.warning("the list cursor came round again; the pass stops there")
            return out
        cursors.add(after)
    log.info("a list pass stopped at %d pages with more pages left", max_pages)
    return out


class Lister:
    """One list pass per status set per cycle, shared by whoever asks in that time."""

    def __init__(
        self, together: TogetherClient, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.together = together
        self.clock = clock
        self._last: dict[tuple[str, ...], ListPass] = {}
        self._running: dict[tuple[str, ...], asyncio.Task[ListPass]] = {}
        self._pages: dict[tuple[str, ...], int] = {}

    def pages_fetched(self, statuses: Sequence[str]) -> int:
        """Pages of `statuses` this process has asked Together for, in all."""
        return self._pages.get(tuple(sorted(statuses)), 0)

    async def get(
        self,
        statuses: Sequence[str],
        *,
        max_pages: int,
        since: float,
        on_page: Callable[[list[TrainingSession]], Awaitable[None]] | None = None,
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
        if task is None:
            task = asyncio.create_task(
                list_pass(
                    self.together, key, max_pages=max_pages, clock=self.clock, on_page=on_page
                )
            )
            self._running[key] = task
            task.add_done_callback(lambda _: self._running.pop(key, None))
            task.add_done_callback(lambda t: self._count(key, t))
        result = await asyncio.shield(task)
        self._last[key] = result
        return result

    def forget(self, statuses: Sequence[str]) -> None:
        """Let go of the last pass of `statuses` (its sessions) once its cycle is over."""
        self._last.pop(tuple(sorted(statuses)), None)

    def _count(self, key: tuple[str, ...], task: asyncio.Task[ListPass]) -> None:
        if not task.cancelled() and task.exception() is None:
            self._pages[key] = self._pages.get(key, 0) + task.result().pages
