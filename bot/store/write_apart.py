"""Writing a batch so that one bad item costs only itself.

A batch is written in one transaction; when that fails, each half is written in
its own, halved again where it fails, until the items at fault stand alone (one
among n costs about 2*log2(n) transactions). What the caller calls fatal (the
database gone, where every part would fail alike) is raised at once, and so is
a failure of every part of a batch of several: the fault is then in no one item.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

log = logging.getLogger(__name__)

_T = TypeVar("_T")


async def write_apart(
    items: Sequence[_T],
    write: Callable[[Sequence[_T]], Awaitable[None]],
    *,
    fatal: Callable[[Exception], bool],
    split_warning: str,
) -> list[tuple[_T, Exception]]:
    """Write `items` with `write`, splitting as above; the items set aside, each
    with what its own write raised. `split_warning` is logged (with the error's
    type) the first time the whole batch fails and is split."""
    failures: list[tuple[_T, Exception]] = []

    async def attempt(chunk: Sequence[_T]) -> None:
        try:
            await write(chunk)
        except Exception as exc:
            if fatal(exc):
                raise
            if len(chunk) == 1:
                failures.append((chunk[0], exc))
                return
            if chunk is items:
                log.warning(split_warning, type(exc).__name__)
            half = len(chunk) // 2
            await attempt(chunk[:half])
            await attempt(chunk[half:])

    await attempt(items)
    if failures and len(failures) == len(items) > 1:
        raise failures[0][1]
    return failures
