"""`/rl-session ls`: what is running across the org, one Together page at a time
(the query and its More button are in `bot.commands.ls_query`).

The first page reuses a complete list pass another consumer in this process
began within `SHARE_SECONDS` (the poller's live statuses, the error watch's
ERROR) when its statuses include the query's and every row it keeps fits on one
page: then nothing is listed again. Otherwise Together is asked, as for More.
Sessions the bot watches show what its polls measured of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial

from bot.alerts.idle import ACTIVE
from bot.alerts.resource_reader import live_resource_pages
from bot.alerts.subscribed_idle import known_idle_since
from bot.commands.asker import Sessionmaker
from bot.commands.card import stall_threshold
from bot.commands.deps import CommandDeps
from bot.commands.ls_query import ListQuery, More, creators, more_value
from bot.rendering.blocks import Message
from bot.rendering.ls_page import LS_PAGE, SessionRow, list_title, session_list_page
from bot.store.queries.watched_sessions import stored_progress
from bot.store.tables import utcnow
from bot.together.client import TogetherClient
from bot.together.list_pass import SHARE_SECONDS, Lister, ListPass
from bot.training.poll_progress import PollProgress
from bot.training.resources import ModelResource
from bot.training.rules import stalled_for
from bot.training.sessions import TrainingSession
from bot.training.status import ResourceStatus

#: the stored progress (`watched_sessions.progress`) of those of these sessions the bot watches
ProgressLookup = Callable[[list[str]], Awaitable[Mapping[str, PollProgress]]]
#: pages of live resources read for one `ls` page, at most (100 resources each)
MAX_RESOURCE_PAGES = 5


@dataclass(frozen=True)
class Page:
    rows: list[SessionRow]
    #: Together's cursor for the next page, None on the last
    after: str | None


def keep(session: TrainingSession, query: ListQuery, created_by: Sequence[str] | None) -> bool:
    """Filters Together's list cannot apply: the model, and several creators."""
    if query.model is not None and (session.base_model or "").lower() != query.model.lower():
        return False
    return created_by is None or len(created_by) == 1 or session.created_by in created_by


def from_pass(
    listed: ListPass, query: ListQuery, created_by: Sequence[str] | None
) -> list[TrainingSession] | None:
    """The whole answer from a complete pass of the query's statuses or more: its
    sessions of those statuses the query keeps, in list order; None when they do not
    fit on one page (a page of it would need Together's own cursor for More)."""
    ids = listed.ids_in(query.statuses)
    if len(ids) > 5 * LS_PAGE:  # filtering that many on the loop costs more than a page
        return None
    kept = []
    for sid in ids:
        session = listed.session(sid)
        if keep(session, query, created_by) and (
            created_by is None or session.created_by in created_by
        ):
            kept.append(session)
            if len(kept) > LS_PAGE:
                return None
    return kept


async def fetch_page(
    together: TogetherClient,
    query: ListQuery,
    *,
    created_by: Sequence[str] | None,
    after: str | None = None,
    lister: Lister | None = None,
) -> Page:
    """One Together page of sessions (100), filtered, with their live resources.

    One creator is filtered by Together; several, and the model, here (so a
    page may show fewer than 100 rows, never skips any). Resource states come
    from one list of the live resources, not a GET per row. The first page is
    taken from `lister`'s recent complete pass of these statuses or more when
    there is one and the answer fits on it (no More)."""
    shared = None
    if after is None and lister is not None and query.statuses:
        listed = await lister.covering(query.statuses, since=lister.clock() - SHARE_SECONDS)
        if listed is not None:
            shared = from_pass(listed, query, created_by)
    if shared is not None:
        kept, cursor = shared, None
    else:
        sessions, cursor = await together.list_sessions(
            status=query.statuses,
            created_by=created_by[0] if created_by is not None and len(created_by) == 1 else None,
            after=after,
            limit=LS_PAGE,
        )
        kept = [s for s in sessions if keep(s, query, created_by)]
    wanted = {s.model_resources_id for s in kept if s.model_resources_id}
    resources = await live_resources(together, wanted) if wanted else {}
    rows = [SessionRow(session=s, resource=resources.get(s.model_resources_id or "")) for s in kept]
    return Page(rows, cursor)


async def live_resources(
    together: TogetherClient, wanted: set[str], *, max_pages: int = MAX_RESOURCE_PAGES
) -> dict[str, ModelResource]:
    """The pending, creating and ready resources among `wanted`, by id: one pass of
    Together's list (page by page, up to `max_pages`, ending as soon as every
    wanted one is found), never a request per row. A resource not listed is
    neither: stopped, in error, or past the pages read. A failed page only
    leaves the rest of the column empty."""
    found: dict[str, ModelResource] = {}
    async for page, _ in live_resource_pages(together, max_pages=max_pages):
        found.update((r.id, r) for r in page if r.id in wanted)
        if wanted <= found.keys():
            break
    return found


async def page_message(
    together: TogetherClient,
    query: ListQuery,
    *,
    caller: str,
    user_map: Mapping[str, str],
    now: datetime,
    after: str | None = None,
    first_number: int = 1,
    progress_of: ProgressLookup | None = None,
    stall_after: timedelta | None = None,
    lister: Lister | None = None,
) -> Message | str:
    """The `ls` answer for one page (with More when Together has another), or
    a refusal in words (a user with no CREATED_BY_USER_MAP entry). Sessions the
    bot watches show the steps/min it measured and whether they are stalled."""
    created_by = creators(query, caller=caller, user_map=user_map)
    if isinstance(created_by, str):
        return created_by
    page = await fetch_page(together, query, created_by=created_by, after=after, lister=lister)
    if progress_of is not None and page.rows:
        stored = await progress_of([row.session.id for row in page.rows])
        busy = {r.session.model_resources_id for r in page.rows if r.session.status_enum in ACTIVE}
        rows = [
            with_progress(r, stored.get(r.session.id), now, stall_after, busy=busy)
            for r in page.rows
        ]
        page = Page(rows, page.after)
    value = (
        more_value(More(query, page.after, first_number + len(page.rows))) if page.after else None
    )
    who = None if query.who is None else "mine" if query.who == "mine" else f"by {query.who}"
    return session_list_page(
        page.rows,
        title=list_title(query.status, who, query.model),
        now=now,
        first_number=first_number,
        more_value=value,
    )


def with_progress(
    row: SessionRow,
    stored: PollProgress | None,
    now: datetime,
    stall_after: timedelta | None,
    *,
    busy: Collection[str | None] = (),
) -> SessionRow:
    """A row with what the bot's own watch knows of a session it watches: the
    steps/min its polls measured; stalled when a RUNNING session's step has not
    moved for `stall_after` (None: not judged); and an idle resource when the
    subscribed-idle watch found it with no CREATING or RUNNING session, the live
    resources still list it READY, and no session on this page runs on it
    (`busy`: the resources of the page's CREATING or RUNNING rows)."""
    progress = stored.progress() if stored is not None else None
    resource = row.resource
    idle = (
        resource is not None
        and resource.status_enum is ResourceStatus.READY
        and row.session.status_enum not in ACTIVE
        and resource.id not in busy
        and stored is not None
        and known_idle_since(stored, resource.id) is not None
    )
    if progress is None:
        return replace(row, idle_resource=idle)
    frozen = stalled_for(progress, now)
    stalled = stall_after is not None and frozen is not None and frozen >= stall_after
    return replace(row, rate=progress.rate, stalled=stalled, idle_resource=idle)


async def progress_of(
    sessionmaker: Sessionmaker, session_ids: list[str]
) -> dict[str, PollProgress]:
    """What the bot's polls measured of these sessions (those it watches), for `ls`."""
    async with sessionmaker() as db:
        return await stored_progress(db, session_ids)


async def org_sessions_page(
    deps: CommandDeps,
    *,
    query: ListQuery,
    caller: str,
    after: str | None = None,
    first_number: int = 1,
    lister: Lister | None = None,
) -> Message | str:
    """One `ls` page (the first, or the one More asks for), with what the bot's
    polls measured of the sessions it watches; the first from a fresh pass of
    `lister` (the process's own) when one covers it."""
    return await page_message(
        deps.together,
        query,
        caller=caller,
        user_map=deps.settings.created_by_user_map,
        now=utcnow(),
        after=after,
        first_number=first_number,
        progress_of=partial(progress_of, deps.sessionmaker),
        stall_after=stall_threshold(deps.settings),
        lister=lister,
    )
