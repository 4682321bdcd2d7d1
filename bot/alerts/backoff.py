"""How long a read that keeps failing waits before it is tried again, for the
reads a process keeps in memory (a model resource, a price): the first retry
after READ_RETRY_SECONDS (FIRST_SECONDS unless set), doubling with each failure
in a row up to MOST_SECONDS, so one thing Together cannot answer for costs a
request every few minutes rather than one every cycle. Keys not failing are
not kept; a key's count is forgotten once it has not failed for FORGET_SECONDS."""

from __future__ import annotations

import math
from collections.abc import Callable

#: the wait after the first failure, unless READ_RETRY_SECONDS says otherwise
FIRST_SECONDS = 30.0
#: the longest wait, however many failures in a row
MOST_SECONDS = 900.0
#: a key whose last failure is this old starts again from the first wait
FORGET_SECONDS = 3600.0
#: the most keys kept (the oldest failures go first): keys come from outside
MAX_KEYS = 4096


def wait_after(
    failures: int, retry_after: float | None = None, *, first: float = FIRST_SECONDS
) -> float:
    """The wait after `failures` failures in a row (1: the first, which waits
    `first`), or the server's Retry-After when it is longer (up to MOST_SECONDS).
    Pure."""
    wait = float(min(first * 2 ** min(max(failures - 1, 0), 10), MOST_SECONDS))
    if retry_after is not None and math.isfinite(retry_after):
        wait = max(wait, min(retry_after, MOST_SECONDS))
    return wait


class Backoff:
    """The keys that failed in a row, and when each may be tried again."""

    def __init__(self, clock: Callable[[], float], *, first: float = FIRST_SECONDS) -> None:
        self._clock = clock
        self._first = first
        # key -> (failures in a row, when it may be tried again, when it last failed)
        self._failed: dict[str, tuple[int, float, float]] = {}

    def ready(self, key: str) -> bool:
        """Whether the key may be tried now (never failed, or its wait is over)."""
        entry = self._failed.get(key)
        return entry is None or self._clock() >= entry[1]

    def failed(self, key: str, retry_after: float | None = None) -> float:
        """Note a failure; returns the wait before the next try."""
        now = self._clock()
        before = self._failed.pop(key, None)
        failures = 1 if before is None or now - before[2] >= FORGET_SECONDS else before[0] + 1
        wait = wait_after(failures, retry_after, first=self._first)
        self._failed[key] = (failures, now + wait, now)
        while len(self._failed) > MAX_KEYS:
            del self._failed[next(iter(self._failed))]
        return wait

    def succeeded(self, key: str) -> None:
        self._failed.pop(key, None)

    def prune(self) -> None:
        """Forget the keys that have not failed for FORGET_SECONDS."""
        now = self._clock()
        for key in [k for k, v in self._failed.items() if now - v[2] >= FORGET_SECONDS]:
            del self._failed[key]
