"""The Together-shaped server's list routes: sessions and model resources in cursor
pages (`meta.next_cursor`, `has_more`), status filters in every form the SDK sends,
short pages (`page_rows`) and a session list that never ends (`endless_list`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._http import Response
from .together_shapes import (
    LISTABLE_STATUSES,
    RESOURCE_PREFIX,
    RESOURCE_STATUSES,
    STATUS_PREFIX,
    _uid,
    error_body,
    full_resource_status,
    full_status,
    make_session,
)
from .together_store import TogetherStore

__all__ = ["ENDLESS_CURSOR", "ListRoutes"]

#: the cursors of the made-up pages past the end of an endless session list
ENDLESS_CURSOR = "endless-"


class ListRoutes(TogetherStore):
    """`_list_sessions` and `_list_resources`, served by `FakeTogether._serve`."""

    def _list_sessions(self, query: dict[str, list[str]], target: str = "") -> Response:
        statuses = _statuses(query, full_status, LISTABLE_STATUSES)
        if isinstance(statuses, Response):
            return statuses
        creator = _one(query, "created_by")
        if creator == "me":
            creator = self.key_owner
        resource_id = _one(query, "model_resources_id")
        after = _one(query, "after") or ""
        if self.endless_list and after.startswith(ENDLESS_CURSOR):
            response = self._endless_page(after, statuses)
            if self.on_list_page is not None:
                self.on_list_page(target)
            return response
        with self._lock:
            # Only the page is copied: a pass over thousands of sessions must not cost
            # this server a copy of all of them per page.
            items = [
                s
                for s in self.sessions.values()
                if (not statuses or s.get("status") in statuses)
                and (creator is None or s.get("created_by") == creator)
                and (resource_id is None or s.get("model_resources_id") == resource_id)
            ]
            for item in items:
                self._advance(item)
            order = dict(self._order)
            items.sort(key=lambda s: order.get(str(s["id"]), 0))
            response = _page(
                items, query, position=order.get, endless=self.endless_list, most=self.page_rows
            )
        hook = self.on_list_page
        if hook is not None:
            hook(target)
        return response

    def _endless_page(self, after: str, statuses: set[str]) -> Response:
        """A page past the end of an endless list: one made-up session of the first
        status asked for, and a fresh cursor."""
        try:
            n = int(after[len(ENDLESS_CURSOR) :]) + 1
        except ValueError:
            n = 0
        status = min(statuses) if statuses else STATUS_PREFIX + "RUNNING"
        made_up = make_session(_uid("endless", str(n)), status, checkpoints=0)
        cursor = f"{ENDLESS_CURSOR}{n}"
        return Response.json(
            {"data": [made_up], "meta": {"has_more": True, "limit": 100, "next_cursor": cursor}}
        )

    def _list_resources(self, query: dict[str, list[str]]) -> Response:
        allowed = frozenset(RESOURCE_PREFIX + s for s in RESOURCE_STATUSES)
        statuses = _statuses(query, full_resource_status, allowed)
        if isinstance(statuses, Response):
            return statuses
        creator = _one(query, "created_by")
        if creator == "me":
            creator = self.key_owner
        with self._lock:
            # Encoded under the lock, so no copy of thousands of resources a page.
            items = [
                r
                for r in self.resources.values()
                if (not statuses or r.get("status") in statuses)
                and (creator is None or r.get("created_by") == creator)
            ]
            return _page(items, query, most=self.page_rows)


def _one(query: dict[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[-1] if values and values[-1] else None


def _statuses(
    query: dict[str, list[str]], full: Callable[[str], str], allowed: frozenset[str]
) -> set[str] | Response:
    """`status[]=A&status[]=B` (brackets), `status=A` or `status=A,B` (the SDK's comma form)."""
    raw = query.get("status[]", []) + query.get("status", [])
    wanted = {full(part.strip()) for value in raw for part in value.split(",") if part.strip()}
    unknown = sorted(wanted - allowed)
    if unknown:
        return Response.json(
            error_body(f"Invalid status filter: {unknown[0]}", "invalid_parameter", param="status"),
            status=400,
        )
    return wanted


def _page(
    items: list[dict[str, Any]],
    query: dict[str, list[str]],
    position: Callable[[str], int | None] | None = None,
    endless: bool = False,
    most: int | None = None,
) -> Response:
    """One cursor page: `after` is the id of the previous page's last item. With
    `position` (sessions) the page starts after that item's place in list order,
    whether or not it is still listed; without, after the item itself. `endless`:
    the last page says there is more, under a made-up cursor. `most`: the rows a
    page holds at most, below `limit` (which `meta` still echoes)."""
    try:
        limit = max(1, min(100, int(_one(query, "limit") or 100)))
    except ValueError:
        return Response.json(
            error_body("Invalid limit", "invalid_parameter", param="limit"), status=400
        )
    after = _one(query, "after")
    if after and position is not None:
        start = position(after)
        items = (
            [i for i in items if (position(str(i["id"])) or 0) > start] if start is not None else []
        )
    elif after:
        ids = [item["id"] for item in items]
        items = items[ids.index(after) + 1 :] if after in ids else []
    page = items[: min(limit, most or limit)]
    has_more = len(items) > len(page)
    cursor = str(page[-1]["id"]) if page and has_more else ""
    if endless and not has_more:
        has_more, cursor = True, f"{ENDLESS_CURSOR}0"
    return Response.json(
        {"data": page, "meta": {"has_more": has_more, "limit": limit, "next_cursor": cursor}}
    )
