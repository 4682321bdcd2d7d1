"""The spend watch's reads: a watched session's model resource and its price.

`ResourceReader` reads, in the poll cycle after the sessions are fetched, the
model resource of each session (one GET per resource per cycle however many
sessions share it) and its price (`estimate-cost`, cached per resource shape
for an hour: Together's price rarely changes; at most MAX_PRICES shapes, none
past a day). A failed read is transient: the
session's own news goes on, and the card keeps what the last read saw (what is
kept of a read, and when the card is redrawn, is in `bot.alerts.spend`). A
resource or a shape that keeps failing is tried again later each time
(`bot.alerts.backoff`), not every cycle.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Iterable

from bot.alerts.backoff import FIRST_SECONDS, Backoff
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.together.poll_plan import Plan, Seen, choose, max_pages, seen_after
from bot.together.resource_cache import PRICE_TTL_SECONDS, ResourceCache, shape_key
from bot.training.resources import CostEstimate, ModelResource
from bot.training.sessions import TrainingSession
from bot.training.status import ResourceStatus

log = logging.getLogger(__name__)

#: how long a price is kept at all: past its TTL it stands in only when Together
#: cannot price the shape again
PRICE_KEEP_SECONDS = 24 * 3600.0
#: the most resource shapes priced at once (the oldest priced go first): shapes
#: come from outside, and a long-running bot sees ever more of them
MAX_PRICES = 512
#: resource GETs in flight at once
_CONCURRENCY = 8
#: a session not seen this long is forgotten (its next read counts as new)
_FORGET_SESSION_SECONDS = 3600.0
#: a resource on its way somewhere (queued, starting, stopping) is read again at
#: least this often, whatever SPEND_REFRESH_SECONDS says: its queue position and
#: status are what the card is for
MOVING_REFRESH_SECONDS = 60.0
#: resources that stay as they are until something acts on them; for a watched
#: live session that something is the session too (a forced stop stops it, an
#: idle-out expires it), and a session's status change is read at once
SETTLED = frozenset({ResourceStatus.READY, ResourceStatus.STOPPED, ResourceStatus.ERROR})
#: the resources that can bill or will: what a pass of live pages lists
LIVE_RESOURCES = [
    "MODEL_RESOURCES_STATUS_" + s.value
    for s in (ResourceStatus.PENDING, ResourceStatus.CREATING, ResourceStatus.READY)
]

Read = tuple[ModelResource, CostEstimate | None]


class ResourceReader:
    """Model resources and their prices for the sessions of one poll cycle.

    A resource read is reused for `refresh_seconds` (resources change slowly;
    one on its way somewhere for at most MOVING_REFRESH_SECONDS) unless one of
    its sessions changed status since the reader last saw it: each cycle reads
    only the due resources, each once. Many due ones are read with
    pages of the live resources list (100 a page) rather than a GET each,
    whichever the poll plan's estimate (`bot.together.poll_plan.choose`: the last pass's
    pages against the due count) finds cheaper; a due resource the pages do not
    show is read with a GET (absence is not evidence). Prices outlive cycles,
    keyed by the resource's shape."""

    def __init__(
        self,
        together: TogetherClient,
        *,
        clock: Callable[[], float] = time.monotonic,
        refresh_seconds: float = 300.0,
        retry_seconds: float = FIRST_SECONDS,
        cache: ResourceCache | None = None,
    ) -> None:
        self._together = together
        self._clock = clock if cache is None else cache.clock
        self._refresh = refresh_seconds
        shared = cache if cache is not None else ResourceCache(clock)
        # resource id -> (read, when); a failed read is not kept. Shared with the
        # cards people ask for (`cache`), so one read serves both.
        self._reads: dict[str, tuple[ModelResource, float]] = shared.reads
        # resources read or tried this cycle (a failed one is not tried again)
        self._tried: set[str] = set()
        # session id -> (status, resource id, when) as last seen
        self._sessions: dict[str, tuple[str, str, float]] = {}
        self._prices: dict[str, tuple[CostEstimate, float]] = shared.prices
        # Resources and shapes whose last reads failed, and when each is tried again.
        self._resource_backoff = Backoff(self._clock, first=retry_seconds)
        self._price_backoff = Backoff(self._clock, first=retry_seconds)
        self._seen: Seen | None = None  # what the last pass of live pages saw
        self._listed = False  # a pass ran this cycle
        # Live resources this cycle's pass listed, for the parts still to come.
        self._listed_now: dict[str, ModelResource] = {}
        self._expected = 0  # sessions this cycle will hand over in all (`expect`)
        self._handed = 0  # and handed over so far
        self._cycle_at = clock()  # when this cycle began (`begin_cycle`)
        self.gets = 0
        self.pages = 0

    def begin_cycle(self) -> None:
        now = self._clock()
        self._tried.clear()
        self._listed = False
        self._listed_now = {}
        self._expected = self._handed = 0
        self._cycle_at = now
        # In place: the dicts are shared with the cards' reads (`ResourceCache`).
        for r in [r for r, v in self._reads.items() if not self._fresh(v, now)]:
            del self._reads[r]
        self._sessions = {
            s: v for s, v in self._sessions.items() if now - v[2] < _FORGET_SESSION_SECONDS
        }
        for s in [s for s, v in self._prices.items() if now - v[1] >= PRICE_KEEP_SECONDS]:
            del self._prices[s]
        self._resource_backoff.prune()
        self._price_backoff.prune()

    def due(self, sessions: Iterable[TrainingSession]) -> tuple[dict[str, str], list[str]]:
        """The sessions' resources by session, and the resources to read now: not
        read within `refresh_seconds`, or one of their sessions changed status
        (or is new to the reader); never one already tried this cycle, nor one
        whose failed reads make it wait (`bot.alerts.backoff`)."""
        now = self._clock()
        wanted: dict[str, str] = {}
        moved: set[str] = set()
        for s in sessions:
            if not s.model_resources_id:
                continue
            wanted[s.id] = s.model_resources_id
            before = self._sessions.get(s.id)
            if before is None or before[:2] != (s.status, s.model_resources_id):
                moved.add(s.model_resources_id)
            self._sessions[s.id] = (s.status, s.model_resources_id, now)
        due = sorted(
            r
            for r in set(wanted.values()) - self._tried
            if (r in moved or not self._is_fresh(r, now)) and self._resource_backoff.ready(r)
        )
        return wanted, due

    def _fresh(self, read: tuple[ModelResource, float], now: float) -> bool:
        resource, at = read
        keep = self._refresh
        if resource.status_enum not in SETTLED:
            keep = min(keep, MOVING_REFRESH_SECONDS)
        return now - at < keep

    def _is_fresh(self, resource_id: str, now: float) -> bool:
        read = self._reads.get(resource_id)
        return read is not None and self._fresh(read, now)

    def expect(self, sessions: int) -> None:
        """This cycle will hand over `sessions` more sessions to `read`, in parts
        (the poller's pages): a pass of live pages is then sized for them all and
        kept for the later parts, not ended once the first part's are found."""
        self._expected += sessions

    async def read(self, sessions: Iterable[TrainingSession]) -> dict[str, Read]:
        """Each session's resource and price (None when unknown); sessions whose
        resource could not be read are left out."""
        part = list(sessions)
        wanted, due = self.due(part)
        self._handed += len(part)
        self._tried.update(due)
        if due:
            await self._read(due, part=len(part))
        out: dict[str, Read] = {}
        for session_id, resource_id in wanted.items():
            kept = self._reads.get(resource_id)
            if kept is not None:
                out[session_id] = (kept[0], await self._price(kept[0]))
        return out

    def plan(self, due: int) -> Plan:
        """GETs or a pass of live pages for `due` resources (one pass a cycle)."""
        if self._listed:
            return Plan.GET
        return choose(due, self._seen, now=self._clock())

    def _due_to_come(self, coming: int, *, part: int, due: int) -> int:
        """How many resources the cycle's `coming` sessions will find due: those of
        the sessions known from earlier cycles and not handed over yet in this one
        that are not fresh, and for sessions never seen, as many as this part
        found per session. Not this part's share of due ones times the parts to
        come: a few status changes in one part are not a refresh of them all."""
        if not coming:
            return 0
        now = self._clock()
        waiting = [v[1] for v in self._sessions.values() if v[2] < self._cycle_at]
        stale = {
            r
            for r in waiting
            if r not in self._tried
            and r not in self._listed_now
            and not self._is_fresh(r, now)
            and self._resource_backoff.ready(r)
        }
        unseen = max(0, coming - len(waiting))
        return min(coming, len(stale) + math.ceil(unseen * due / max(part, 1)))

    async def _read(self, due: list[str], *, part: int) -> None:
        now = self._clock()
        # Listed by this cycle's pass: read already, for no request.
        for resource_id in due:
            if resource_id in self._listed_now:
                self._reads[resource_id] = (self._listed_now[resource_id], now)
        left = set(due) - self._listed_now.keys()
        if not left:
            return
        # The cycle's due resources: this part's, as many again for each part to come.
        coming = max(0, self._expected - self._handed)
        projected = len(left) + self._due_to_come(coming, part=part, due=len(left))
        if self.plan(projected) is Plan.LIST:
            self._listed = True
            known = {v[1] for v in self._sessions.values()}
            listed, complete = 0, False
            full_rows, full_pages = 0, 0  # pages followed by another: a page's size
            async for page, last in live_resource_pages(
                self._together, max_pages=max_pages(projected)
            ):
                self.pages += 1
                listed += len(page)
                complete = last
                if not last:
                    full_rows, full_pages = full_rows + len(page), full_pages + 1
                for r in page:
                    if coming:
                        self._listed_now[r.id] = r
                    if r.id in known:  # a live resource of a watched session: a read
                        self._reads[r.id] = (r, now)
                        self._resource_backoff.succeeded(r.id)
                        left.discard(r.id)
                if not left and not coming:
                    break
            self._seen = seen_after(
                listed=listed,
                complete=complete,
                due=len(due),
                missing=len(left),
                at=now,
                before=self._seen,
                per_page=full_rows / full_pages if full_pages else None,
            )
        gate = asyncio.Semaphore(_CONCURRENCY)

        async def one(resource_id: str) -> None:
            async with gate:
                self.gets += 1
                try:
                    got = await self._together.get_model_resource(resource_id, max_wait=5)
                except TogetherError as exc:
                    if not exc.sent:  # held back (no budget share, a 429 pause): next cycle
                        return
                    self._reads.pop(resource_id, None)
                    wait = self._resource_backoff.failed(resource_id, exc.retry_after)
                    log.info(
                        "could not read model resource: %s; next try in %.0f s", exc.kind, wait
                    )
                    return
                self._resource_backoff.succeeded(resource_id)
                self._reads[resource_id] = (got, self._clock())

        await asyncio.gather(*(one(r) for r in sorted(left)))

    async def price(self, resource: ModelResource) -> CostEstimate | None:
        """A resource's price per hour, from the cache when its shape was priced
        within the hour (None when Together cannot say)."""
        return await self._price(resource)

    async def _price(self, resource: ModelResource) -> CostEstimate | None:
        shape = shape_key(resource)
        cached = self._prices.get(shape)
        now = self._clock()
        if cached is not None and now - cached[1] < PRICE_TTL_SECONDS:
            return cached[0]
        if not self._price_backoff.ready(shape):
            return cached[0] if cached is not None else None
        try:
            price = await self._together.estimate_cost(resource)
        except TogetherError as exc:
            if not exc.sent:  # held back (no budget share, a 429 pause): asked again later
                return cached[0] if cached is not None else None
            wait = self._price_backoff.failed(shape, exc.retry_after)
            log.info("no price for a model resource: %s; next try in %.0f s", exc.kind, wait)
            return cached[0] if cached is not None else None
        self._price_backoff.succeeded(shape)
        self._prices.pop(shape, None)  # kept in the order priced: the oldest first
        self._prices[shape] = (price, now)
        while len(self._prices) > MAX_PRICES:
            del self._prices[next(iter(self._prices))]
        return price


async def live_resource_pages(
    together: TogetherClient, *, max_pages: int
) -> AsyncIterator[tuple[list[ModelResource], bool]]:
    """Pages of the live (pending, creating, ready) resources, 100 asked a page, with
    whether each is the last (Together's `meta` says), up to `max_pages`. A page
    that fails ends the pass after the pages read."""
    cursor: str | None = None
    for _ in range(max_pages):
        try:
            page, cursor = await together.list_model_resources(
                status=LIVE_RESOURCES, after=cursor, limit=100
            )
        except TogetherError as exc:
            log.info("could not list model resources: %s", exc.kind)
            return
        yield page, cursor is None
        if cursor is None:
            return
