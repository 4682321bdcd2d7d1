"""Reading Together's answers: one object, a list page's rows, the next cursor.

A list page's row that does not parse is skipped, not fatal (one odd row must
not hide the others); an object asked for by id must be that object.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import ValidationError

from bot.together.errors import TogetherError
from bot.training.resources import ModelResource
from bot.training.sessions import RawSession, TrainingSession

log = logging.getLogger(__name__)


def next_cursor(body: dict[str, Any], last_id: str | None) -> str | None:
    """The next page's cursor from `meta` (or the older top level), None on the last page.

    `has_more` decides; a missing cursor falls back to the page's last id (the SDK
    documents `after` as the last session's id)."""
    meta = body.get("meta")
    sources = [meta, body] if isinstance(meta, dict) else [body]
    has_more = next((s["has_more"] for s in sources if isinstance(s.get("has_more"), bool)), None)
    cursor = next((str(s[k]) for s in sources for k in ("next_cursor", "after") if s.get(k)), None)
    if has_more is None:
        has_more = cursor is not None
    if not has_more:
        return None
    return cursor or last_id


_Parsed = TypeVar("_Parsed", TrainingSession, ModelResource, RawSession)


def query_string(params: list[tuple[str, str]]) -> str:
    """A URL's query, each value escaped (a status or cursor cannot add a parameter)."""
    return "&".join(f"{k}={quote(v, safe='')}" for k, v in params)


def list_query(
    status: str | Sequence[str] | None,
    *,
    limit: int,
    after: str | None,
    **filters: str | None,
) -> str:
    """A list endpoint's query, as Together reads it: `status[]=A&status[]=B`, then
    the filters that are set, the page size (1 to 100) and the cursor."""
    statuses = [status] if isinstance(status, str) else list(status or [])
    params = [("status[]", s) for s in statuses]
    params += [(name, value) for name, value in filters.items() if value]
    params.append(("limit", str(max(1, min(100, limit)))))
    if after:
        params.append(("after", after))
    return query_string(params)


def parse_sessions(rows: list[Any]) -> list[TrainingSession]:
    """The sessions of a page's rows (`list_session_rows`); see `parse_each`."""
    return parse_each(TrainingSession.model_validate, rows, "session")


def raw_sessions(rows: list[Any]) -> list[RawSession]:
    """A page's rows (`list_session_rows`) with their heads read; a row whose
    head does not parse is skipped, as `parse_sessions` skips it."""
    return parse_each(RawSession.of, rows, "session")


def parse_each(
    parse: Callable[[dict[str, Any]], _Parsed], items: list[Any], what: str
) -> list[_Parsed]:
    """A list page's rows; one that does not parse is skipped, not fatal: one odd
    row must not hide the others."""
    parsed = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            try:
                parsed.append(parse(item))
            except (ValueError, RecursionError) as exc:  # pydantic's, or JSON too deep
                log.warning(
                    "skipping a %s that does not parse (id %r): %s",
                    what,
                    item["id"][:100],
                    type(exc).__name__,
                )
    return parsed


def parse_one(
    parse: Callable[[dict[str, Any]], _Parsed], data: Any, expected_id: str, what: str
) -> _Parsed:
    """One object from an answer (`parse` reads it), which must be the one asked
    for (`what` names it in the error: "training session", "model resource")."""
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise TogetherError("bad_response", f"not a {what}")
    try:
        parsed = parse(data)
    except ValidationError as exc:
        raise TogetherError("bad_response", f"{exc.error_count()} invalid fields") from exc
    except (ValueError, RecursionError) as exc:  # nested too deep to hold as text
        raise TogetherError("bad_response", f"not a readable {what}") from exc
    if parsed.id != expected_id:
        raise TogetherError("bad_response", f"answer is for another {what}")
    return parsed
