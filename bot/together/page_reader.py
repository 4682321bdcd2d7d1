"""A list page read row by row when it cannot be read whole.

Together's rows carry free-form JSON (a session's `metadata`), and one row
holding what Python's JSON reader refuses (an integer of more than 4,300
digits, nesting about a thousand deep) would make the whole page unreadable,
and with it every pass, `ls` and watch that lists it. So a page is first read
whole (the usual case, at full speed); when that fails it is split into its
rows without parsing them (one pass over the text, no recursion), each row is
read on its own, and a row that cannot be read is skipped and named in the log.
Anything outside the rows that cannot be read (the cursor, the page's frame)
still makes the page a bad answer: `ValueError`, as the whole read raised.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

log = logging.getLogger(__name__)

#: where a page keeps its rows (as `TogetherClient.list_session_rows` reads them)
ROW_KEYS = frozenset({"data", "training_sessions", "sessions"})

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
# Inside a container only strings and runs of brackets matter: a string is
# skipped whole, so a bracket inside one is never counted, and a run (a thousand
# `[` in a row) is counted at once.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]+', re.DOTALL)
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_SCALAR = re.compile(r"[^,\]}\s]*")
_SPACE = re.compile(r"\s*")
_MAX_NAME = 100


def read_page(content: bytes) -> Any:
    """A list page's JSON; rows that cannot be read are left out (and logged)."""
    try:
        return json.loads(content)
    except (RecursionError, ValueError):
        pass
    text = content.decode("utf-8")  # not UTF-8: a bad answer, as a whole read says
    at = _skip(text, 0)
    if text.startswith("[", at):
        page: Any = _rows(text, at)
    elif text.startswith("{", at):
        page = {}
        for key, start, end in _members(text, at):
            value = text[start:end]
            page[key] = _rows(text, start) if key in ROW_KEYS and value[:1] == "[" else _load(value)
    else:
        raise ValueError("not a JSON object or array")
    return page


def _rows(text: str, at: int) -> list[Any]:
    rows = []
    for start, end in _elements(text, at):
        raw = text[start:end]
        try:
            rows.append(json.loads(raw))
        except (RecursionError, ValueError) as exc:
            reason = "nested too deep" if isinstance(exc, RecursionError) else str(exc)[:120]
            log.warning("skipping a listed row that cannot be read (id %s): %s", _name(raw), reason)
    return rows


def _load(raw: str) -> Any:
    try:
        return json.loads(raw)
    except RecursionError as exc:
        raise ValueError("nested too deep") from exc


def _name(raw: str) -> str:
    """The row's own `id`, read without parsing the row (it cannot be parsed)."""
    try:
        for key, start, end in _members(raw, _skip(raw, 0)):
            if key == "id":
                value = json.loads(raw[start:end])
                return repr(value[:_MAX_NAME]) if isinstance(value, str) else "unknown"
    except ValueError:
        pass
    return "unknown"


def _members(text: str, at: int) -> Iterator[tuple[str, int, int]]:
    """The (key, value start, value end) of each member of the object at `at`."""
    if not text.startswith("{", at):
        raise ValueError("not a JSON object")
    at = _skip(text, at + 1)
    if text.startswith("}", at):
        return
    while True:
        match = _STRING.match(text, at)
        if match is None:
            raise ValueError("an object key is not a string")
        key = json.loads(match.group())
        at = _skip(text, match.end())
        if not text.startswith(":", at):
            raise ValueError("no ':' after an object key")
        start = _skip(text, at + 1)
        end = _value_end(text, start)
        yield key, start, end
        at = _skip(text, end)
        if text.startswith("}", at):
            return
        if not text.startswith(",", at):
            raise ValueError("no ',' between object members")
        at = _skip(text, at + 1)


def _elements(text: str, at: int) -> Iterator[tuple[int, int]]:
    """The (start, end) of each element of the array at `at`."""
    at = _skip(text, at + 1)
    if text.startswith("]", at):
        return
    while True:
        end = _value_end(text, at)
        yield at, end
        at = _skip(text, end)
        if text.startswith("]", at):
            return
        if not text.startswith(",", at):
            raise ValueError("no ',' between array elements")
        at = _skip(text, at + 1)


def _value_end(text: str, at: int) -> int:
    """Where the JSON value that starts at `at` ends, found without recursion."""
    if at >= len(text):
        raise ValueError("a value is missing")
    first = text[at]
    if first == '"':
        match = _STRING.match(text, at)
        if match is None:
            raise ValueError("an unterminated string")
        return match.end()
    if first not in "[{":
        end = _SCALAR.match(text, at).end()  # type: ignore[union-attr]  # matches empty
        if end == at:
            raise ValueError("a value is missing")
        return end
    depth = 0
    for token in _TOKEN.finditer(text, at):
        run = token.group()
        if run[0] == '"':
            continue
        closes = run.count("]") + run.count("}")
        if depth - closes > 0:  # cannot come back to 0 within this run
            depth += len(run) - 2 * closes
            continue
        depths = list(accumulate(map(_STEP.__getitem__, run), initial=depth))
        try:
            return token.start() + depths.index(0, 1)
        except ValueError:
            depth = depths[-1]
    raise ValueError("an unclosed array or object")


def _skip(text: str, at: int) -> int:
    return _SPACE.match(text, at).end()  # type: ignore[union-attr]  # matches empty
