"""Learning the due sessions' states from Together, a bounded part at a time.

Each cycle learns them the cheaper way (`bot.together.poll_plan`): one GET each,
or the list pages of the live statuses (shared through
`bot.together.list_pass.Lister`) plus one GET for each due session not listed,
since only a direct GET may say a session ended or is gone.

The promise: every due session is learnt in the cycle that claimed it, read on
a page of this pass or fetched with its own GET. A list pass cut short (by a
failed page, its page limit, a cursor going round) or a server that sends
fewer rows a page than asked leaves some unread: "not on the pages read" means
"not known yet", so each is asked for, never counted as failed. Only an answer
about that session itself (an error, a timeout) is a failed poll, backed off.
The budget may make cycles rarer; it never leaves a claimed session unread.

What is learnt is handed to a `write` callback a part at a time, so a cycle
never holds thousands of sessions at once: with the list plan, each page's due
sessions while the next page loads; GETs `RECORD_CHUNK` at a time, the next
part fetched while one is written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.settings.model import Settings
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.together.list_pass import Lister, ListPass
from bot.together.poll_plan import ERROR_STATUSES, LIVE_STATUSES, Seen, seen_after
from bot.training.sessions import RawSession, TrainingSession
from bot.training.status import Status

log = logging.getLogger(__name__)

# What one poll learnt of a session: its state (as sent, or parsed), or why
# Together did not say.
Fetched = TrainingSession | RawSession | TogetherError
# Stores one bounded part of a batch's results.
Write = Callable[[dict[str, Fetched]], Awaitable[None]]

# A list pass that POLL_PLAN=list forces is not bounded by what GETs would cost.
MAX_LIST_PAGES = 1000
# Sessions written (and, by GET, fetched) at a time: what a cycle holds at once.
RECORD_CHUNK = 500
# List pages handed to the writer and not yet written (held as text, about 150 KB
# each): a slow write holds the pass back only once this many wait.
PAGES_AHEAD = 3


@dataclass(frozen=True)
class Learnt:
    """What learning a batch cost and where it learnt from, for the cycle's counts."""

    gets: int = 0
    from_error_pages: int = 0  # ended sessions learnt from the error watch's pages, not a GET


@dataclass(frozen=True)
class Listing:
    """What a list pass told of a batch: the pass itself, the due sessions it did
    not show (written by neither page), and what the project now looks like."""

    listed: ListPass
    rest: list[str]
    seen: Seen


async def get_and_write(
    together: TogetherClient, ids: list[str], *, settings: Settings, write: Write
) -> int:
    """GET each of `ids`, `RECORD_CHUNK` at a time, the next part fetched while
    one is written; returns how many GETs were made."""
    gets = 0

    async def get(some: list[str]) -> dict[str, Fetched]:
        nonlocal gets
        gets += len(some)
        return await fetch_all(
            together,
            some,
            concurrency=settings.poll_concurrency,
            max_wait=settings.lease_seconds / 4,
        )

    parts = [ids[i : i + RECORD_CHUNK] for i in range(0, len(ids), RECORD_CHUNK)]
    if not parts:
        return gets
    fetching = asyncio.create_task(get(parts[0]))
    for k in range(len(parts)):
        fetched = await fetching
        if k + 1 < len(parts):
            fetching = asyncio.create_task(get(parts[k + 1]))
        await write(fetched)
    return gets


async def list_and_write(
    lister: Lister,
    ids: list[str],
    *,
    pages: int,
    since: float,
    before: Seen | None,
    write: Write,
) -> Listing:
    """Write each of `ids` a list pass of the live statuses shows, page by page
    while the next loads; return the pass, the ids it did not show, and what it
    makes of the project (`before`: what the last pass made of it)."""
    pending = dict.fromkeys(ids)
    pages_in: asyncio.Queue[list[RawSession] | None] = asyncio.Queue()
    # Pages handed over and not yet written: the pass waits for room, so a slow
    # write holds back the next pages instead of parsed pages piling up in memory.
    room = asyncio.Semaphore(PAGES_AHEAD)
    closed = False

    async def on_page(page: list[RawSession]) -> None:
        if not closed:
            await room.acquire()
        if not closed:
            pages_in.put_nowait(page)

    passing = asyncio.create_task(
        lister.get(LIVE_STATUSES, max_pages=pages, since=since, on_page=on_page)
    )
    passing.add_done_callback(lambda _: pages_in.put_nowait(None))
    try:
        while (page := await pages_in.get()) is not None:
            part: dict[str, Fetched] = {s.id: s for s in page if s.id in pending}
            del page
            for sid in part:
                del pending[sid]
            if part:
                await write(part)
            room.release()
    finally:
        # A write failed (or this was cancelled): let the shared pass run on unheld.
        closed = True
        room.release()
        passing.cancel()  # the pass itself is shielded
    listed = passing.result()
    # A pass someone else began (or one already done) streamed nothing to us.
    known = [sid for sid in pending if sid in listed]
    for i in range(0, len(known), RECORD_CHUNK):
        chunk = known[i : i + RECORD_CHUNK]
        for sid in chunk:
            del pending[sid]
        await write({sid: listed.row(sid) for sid in chunk})
    rest = list(pending)
    seen = seen_after(
        listed=len(listed),
        complete=listed.complete,
        due=len(ids),
        missing=len(rest),
        at=listed.at,
        before=before,
        per_page=listed.rows_per_page(),
    )
    return Listing(listed=listed, rest=rest, seen=seen)


async def after_the_pass(
    together: TogetherClient,
    lister: Lister,
    listing: Listing,
    *,
    previous: Seen | None,
    settings: Settings,
    write: Write,
) -> Learnt:
    """Learn and write the due sessions a list pass did not show, each by its own
    GET (the pages not read may hold any of them), or, after a complete pass, its
    end from the error watch's pages (`previous`: what the pass before this one
    made of the project). Never a failure the session's own answer did not give."""
    listed, rest = listing.listed, listing.rest
    from_error_pages = 0
    if rest and listed.complete and listed.error is None:
        # Left the live list: ended or vanished. One listed in an ERROR pass another
        # consumer (the org-wide error watch) began since our last look at the live
        # list is in ERROR for good, and that page is its final state; absence from
        # it says nothing, so the rest are asked for.
        since = previous.at if previous is not None else listed.at - settings.poll_interval_seconds
        errored = await lister.held(ERROR_STATUSES, since=since)
        if errored is not None:
            ended = {
                sid: session
                for sid in rest
                if sid in errored and (session := errored.session(sid)).status_enum is Status.ERROR
            }
            if ended:
                from_error_pages = len(ended)
                rest = [sid for sid in rest if sid not in ended]
                await write(dict(ended))
    # ended or vanished, or on a page this pass did not read: only a GET may say
    gets = await get_and_write(together, rest, settings=settings, write=write)
    return Learnt(gets=gets, from_error_pages=from_error_pages)


async def fetch_all(
    together: TogetherClient, ids: list[str], *, concurrency: int, max_wait: float | None = None
) -> dict[str, Fetched]:
    """Fetch each session once; one failure never stops the others."""
    semaphore = asyncio.Semaphore(concurrency)
    outcomes: dict[str, Fetched] = {}

    async def one(session_id: str) -> None:
        async with semaphore:
            try:
                outcomes[session_id] = await together.get_session_row(session_id, max_wait=max_wait)
            except TogetherError as exc:
                outcomes[session_id] = exc
            except Exception as exc:  # a bug must not sink the cycle
                log.exception("unexpected error polling session", extra={"session_id": session_id})
                outcomes[session_id] = TogetherError("bad_response", type(exc).__name__)

    await asyncio.gather(*(one(i) for i in ids))
    return outcomes
