"""How many bytes of request bodies not yet verified the web server holds at once."""

from __future__ import annotations

# Slack's own requests (slash commands, button clicks with their message) are
# a few kilobytes; this leaves room for a large card's click.
SMALL_BODY_BYTES = 64 << 10


class BodyBudget:
    """Bytes of unverified request bodies held at once, across all connections.

    A signature can only be checked once the whole body is in memory, and anyone
    can send one. Without a bound, many connections that each send most of a
    large body and then stop would hold all of it. So each request reserves its
    declared length before a byte is read (one without a length, the largest
    allowed), and gives it back once read. A request that does not fit is
    refused at once rather than queued: a waiting connection still holds a
    socket and the server's buffer, and its sender is likely the one filling
    the budget.

    Bodies over `SMALL_BODY_BYTES` may take only three quarters of the budget,
    so a flood of large bodies leaves room for Slack's small ones. The largest
    allowed body still fits when nothing else is held, even under a budget
    set smaller than it."""

    def __init__(self, total: int, largest: int) -> None:
        self._total = total
        self._large_limit = max(total - total // 4, largest)
        self._held = 0

    @property
    def held(self) -> int:
        return self._held

    def take(self, size: int) -> bool:
        """Reserve `size` bytes; False (nothing reserved) if they do not fit."""
        limit = self._total if size <= SMALL_BODY_BYTES else self._large_limit
        if self._held + size > limit:
            return False
        self._held += size
        return True

    def give_back(self, size: int) -> None:
        self._held -= size
