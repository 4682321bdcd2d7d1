"""Together's API as the bot uses it: `TogetherClient`.

The training-session endpoints are here; the model-resource ones come from
`ModelResourceEndpoints` and the requests themselves from `Transport`. Failures
are a `TogetherError` (`bot.together.errors`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from bot.together.answers import list_query, next_cursor, parse_one, parse_sessions
from bot.together.errors import TogetherError
from bot.together.page_reader import read_page
from bot.together.resources import ModelResourceEndpoints
from bot.training.sessions import RawSession, TrainingSession, is_session_id


class TogetherClient(ModelResourceEndpoints):
    """Together's training sessions and model resources, over one `httpx.AsyncClient`."""

    def session_url(self, session_id: str) -> str:
        if not is_session_id(session_id):
            raise TogetherError("invalid_id")
        return f"{self._base}/rl/training-sessions/{quote(session_id, safe='')}"

    async def get_session(
        self,
        session_id: str,
        *,
        retries: int = 0,
        backoff: float = 0.5,
        max_wait: float | None = None,
    ) -> TrainingSession:
        """Fetch one session; transient failures are retried `retries` times, and a
        rate-limit pause longer than `max_wait` fails at once."""
        url = self.session_url(session_id)
        attempt = 0
        while True:
            try:
                session: TrainingSession = await self._request(
                    "GET",
                    url,
                    kind="get",
                    max_wait=max_wait,
                    parse=lambda d: _parse_session(d, session_id),
                )
                return session
            except TogetherError as exc:
                if not exc.transient or attempt >= retries:
                    raise
                delay = exc.retry_after if exc.retry_after is not None else backoff * 2**attempt
                if delay > 5:  # a user is waiting: do not sit on a long Retry-After
                    raise
                attempt += 1
                await asyncio.sleep(delay)

    async def list_sessions(
        self,
        *,
        status: str | Sequence[str] | None = None,
        created_by: str | None = None,
        model_resources_id: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> tuple[list[TrainingSession], str | None]:
        """One page of sessions, and the cursor of the next page (None on the last).

        Statuses go in the brackets form of Together's API notes
        (`status[]=A&status[]=B`; together 3.1.1's own client joins them with
        commas, which our test server accepts too), then `created_by` ("me" is
        the key's owner) and `model_resources_id`. Pagination is read from `meta` (`has_more`,
        `next_cursor`), with the older top-level keys as a fallback. Rows that do
        not parse, or cannot even be read as JSON (`page_reader`), are skipped, not
        fatal: one odd session must not hide the others."""
        rows, cursor = await self.list_session_rows(
            status=status,
            created_by=created_by,
            model_resources_id=model_resources_id,
            after=after,
            limit=limit,
        )
        return parse_sessions(rows), cursor

    async def get_session_row(
        self, session_id: str, *, max_wait: float | None = None
    ) -> RawSession:
        """One session as sent, its head read (`RawSession`): what the poller asks
        for, so a session whose row has not changed is not parsed whole again."""
        raw: RawSession = await self._request(
            "GET",
            self.session_url(session_id),
            kind="get",
            max_wait=max_wait,
            parse=lambda d: _raw_session(d, session_id),
        )
        return raw

    async def list_session_rows(
        self,
        *,
        status: str | Sequence[str] | None = None,
        created_by: str | None = None,
        model_resources_id: str | None = None,
        after: str | None = None,
        limit: int = 100,
        sent: asyncio.Event | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """`list_sessions` before its rows are parsed (`parse_sessions`): each a JSON
        object with a string id. The cursor is known first, so a caller paging
        through can ask for the next page while it parses this one; `sent` is set
        once this request has left (not at all through a transport that does not
        say so)."""
        query = list_query(
            status,
            limit=limit,
            after=after,
            created_by=created_by,
            model_resources_id=model_resources_id,
        )
        data = await self._request(
            "GET",
            f"{self._base}/rl/training-sessions?{query}",
            kind="list_page",
            read=read_page,  # one odd row is left out, not the page
            sent=sent,
        )
        if isinstance(data, list):
            items, body = data, {}
        elif isinstance(data, dict):
            body = data
            items = next(
                (
                    data[k]
                    for k in ("data", "training_sessions", "sessions")
                    if isinstance(data.get(k), list)
                ),
                [],
            )
        else:
            raise TogetherError("bad_response", "not a list of sessions")
        rows = [row for row in items if isinstance(row, dict) and isinstance(row.get("id"), str)]
        return rows, next_cursor(body, rows[-1]["id"] if rows else None)

    async def stop_session(self, session_id: str) -> TrainingSession | None:
        """Ask Together to stop a session: the session as it is now, or None when
        Together accepted the stop but neither its answer nor a read after it says
        what the session is now. A failure raises only when the stop was not accepted."""
        try:
            data = await self._request("POST", self.session_url(session_id) + "/stop", kind="stop")
        except TogetherError as exc:
            if not exc.accepted:
                raise
            data = None  # a 2xx whose body is not JSON: accepted all the same
        try:
            return _parse_session(data, session_id)
        except TogetherError:  # the stop was accepted; the body is just not a session
            pass
        try:
            return await self.get_session(session_id, retries=1)
        except TogetherError:
            return None


def _raw_session(data: Any, session_id: str) -> RawSession:
    """`_parse_session` for `get_session_row`: the same checks, on the head."""
    return parse_one(RawSession.of, data, session_id, "training session")


def _parse_session(data: Any, session_id: str) -> TrainingSession:
    return parse_one(TrainingSession.model_validate, data, session_id, "training session")
