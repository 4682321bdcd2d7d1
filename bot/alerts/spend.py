"""The spend watch (issue 12): what a watched session's model resource costs.

`ResourceReader` reads, in the poll cycle after the sessions are fetched, the
model resource of each session (one GET per resource per cycle however many
sessions share it) and its price (`estimate-cost`, cached per resource shape
for an hour: Together's price rarely changes). A failed read is transient: the
session's own news goes on, and the card keeps what the last read saw.

`stored` keeps what the card needs in `watched_sessions.progress["spend"]`:
the resource as read, its price, and how long the bot has seen it READY (the
spend estimate is price × that time). `card_key` says when the card is worth
redrawing: when what it shows of the resource changes, and every
`SPEND_REDRAW_SECONDS` of READY time so the estimate moves without a chat.update
per poll.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar

from pydantic import ValidationError

from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.together.poll_plan import Plan, Seen, choose, max_pages, seen_after
from bot.training.resources import CostEstimate, ModelResource
from bot.training.rules import rate_words
from bot.training.sessions import TrainingSession
from bot.training.status import ResourceStatus

log = logging.getLogger(__name__)

#: how long a price is reused for the same resource shape
PRICE_TTL_SECONDS = 3600.0
#: the card's spend estimate is redrawn once per this much READY time
SPEND_REDRAW_SECONDS = 900.0
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
_M = TypeVar("_M", ModelResource, CostEstimate)


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
    ) -> None:
        self._together = together
        self._clock = clock
        self._refresh = refresh_seconds
        # resource id -> (read, when); a failed read is not kept
        self._reads: dict[str, tuple[ModelResource, float]] = {}
        # resources read or tried this cycle (a failed one is not tried again)
        self._tried: set[str] = set()
        # session id -> (status, resource id, when) as last seen
        self._sessions: dict[str, tuple[str, str, float]] = {}
        self._prices: dict[str, tuple[CostEstimate, float]] = {}
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
        self._reads = {r: v for r, v in self._reads.items() if self._fresh(v, now)}
        self._sessions = {
            s: v for s, v in self._sessions.items() if now - v[2] < _FORGET_SESSION_SECONDS
        }

    def due(self, sessions: Iterable[TrainingSession]) -> tuple[dict[str, str], list[str]]:
        """The sessions' resources by session, and the resources to read now: not
        read within `refresh_seconds`, or one of their sessions changed status
        (or is new to the reader); never one already tried this cycle."""
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
            if r in moved or not self._is_fresh(r, now)
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
            if r not in self._tried and r not in self._listed_now and not self._is_fresh(r, now)
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
            async for page, last in live_resource_pages(
                self._together, max_pages=max_pages(projected)
            ):
                self.pages += 1
                listed += len(page)
                complete = last
                for r in page:
                    if coming:
                        self._listed_now[r.id] = r
                    if r.id in known:  # a live resource of a watched session: a read
                        self._reads[r.id] = (r, now)
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
            )
        gate = asyncio.Semaphore(_CONCURRENCY)

        async def one(resource_id: str) -> None:
            async with gate:
                self.gets += 1
                try:
                    got = await self._together.get_model_resource(resource_id, max_wait=5)
                except TogetherError as exc:
                    log.info("could not read model resource: %s", exc.kind)
                    self._reads.pop(resource_id, None)
                    return
                self._reads[resource_id] = (got, self._clock())

        await asyncio.gather(*(one(r) for r in sorted(left)))

    async def price(self, resource: ModelResource) -> CostEstimate | None:
        """A resource's price per hour, from the cache when its shape was priced
        within the hour (None when Together cannot say)."""
        return await self._price(resource)

    async def _price(self, resource: ModelResource) -> CostEstimate | None:
        shape = json.dumps(resource.estimate_body(), sort_keys=True)
        cached = self._prices.get(shape)
        now = self._clock()
        if cached is not None and now - cached[1] < PRICE_TTL_SECONDS:
            return cached[0]
        try:
            price = await self._together.estimate_cost(resource)
        except TogetherError as exc:
            log.info("no price for a model resource: %s", exc.kind)
            return cached[0] if cached is not None else None
        self._prices[shape] = (price, now)
        return price


async def live_resource_pages(
    together: TogetherClient, *, max_pages: int
) -> AsyncIterator[tuple[list[ModelResource], bool]]:
    """Pages of the live (pending, creating, ready) resources, 100 a page, with
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


def stored(prev: Any, read: Read | None, *, now: datetime) -> dict[str, Any] | None:
    """The new `progress["spend"]`: this read, and the READY time seen so far
    (two READY reads in a row count the time between them). Without a read the
    previous one stands."""
    old = prev if isinstance(prev, dict) else None
    if read is None:
        return old
    resource, price = read
    ready_seconds = 0.0
    if old is not None and old.get("resource_id") == resource.id:
        ready_seconds = float_or_none(old.get("ready_seconds")) or 0.0
        seen = time_or_none(old.get("seen_at"))
        was_ready = old.get("status") == ResourceStatus.READY.value
        if was_ready and resource.status_enum is ResourceStatus.READY and seen is not None:
            ready_seconds += max((now - seen).total_seconds(), 0.0)
        if price is None and isinstance(old.get("price"), dict):
            price = stored_model(CostEstimate, old["price"])
    return {
        "resource_id": resource.id,
        "status": resource.status_enum.value,
        "resource": resource.model_dump(mode="json", exclude_none=True),
        "price": price.model_dump(mode="json") if price is not None else None,
        "ready_seconds": ready_seconds,
        "seen_at": now.isoformat(),
    }


def card_key(spend: Any) -> str | None:
    """A short key of what the card shows of the resource (None: nothing)."""
    if not isinstance(spend, dict):
        return None
    resource: dict[str, Any] = spend["resource"] if isinstance(spend.get("resource"), dict) else {}
    status_details = resource.get("status_details")
    shown = [
        spend.get("status"),
        resource.get("compute_config"),
        status_details.get("queue_position") if isinstance(status_details, dict) else None,
        resource.get("expires_at") if spend.get("status") != ResourceStatus.READY.value else None,
        spend.get("price"),
        int((float_or_none(spend.get("ready_seconds")) or 0.0) // SPEND_REDRAW_SECONDS),
    ]
    digest = hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()
    return digest[:16]


def watch_key(progress: Any) -> str | None:
    """A short key of what the card shows of a `watched_sessions.progress`
    value: the resource (`card_key`) and the steps/min as worded (None: neither)."""
    if not isinstance(progress, dict):
        return None
    spend, rate = card_key(progress.get("spend")), rate_words(float_or_none(progress.get("rate")))
    if spend is None and rate is None:
        return None
    return f"{spend or '-'}:{hashlib.sha256((rate or '').encode()).hexdigest()[:8]}"


def stored_model(model: type[_M], data: Any) -> _M | None:
    """A model read back from stored JSON; None when it no longer validates (an old shape)."""
    if not isinstance(data, dict):
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def float_or_none(value: Any) -> float | None:
    """A stored number, or None when the stored value is not one."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def time_or_none(value: Any) -> datetime | None:
    """A stored ISO time, or None when the stored value is not one."""
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None
