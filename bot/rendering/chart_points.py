"""A series cut down to the few points Slack's chart block draws (pure).

Slack draws at most 20 points a series, so a run's hundred samples or a
session's thousand polls are reduced first. What a reader looks for on a small
chart is where it started, where it is now, and how low and how high it went,
so those four are always kept; the rest are spread evenly between them. Points
that are not finite numbers cannot be drawn (nor sent as JSON) and are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Point = tuple[float, float]

#: the first, the last, a lowest and a highest: the fewest points a reduction keeps
MIN_LIMIT = 4


def finite_points(points: Sequence[Point]) -> list[Point]:
    """The points whose x and y are both finite numbers, in their order."""
    return [(x, y) for x, y in points if math.isfinite(x) and math.isfinite(y)]


def reduce_points(points: Sequence[Point], limit: int) -> list[Point]:
    """At most `limit` of the finite points, in their order: the first, the
    last, a lowest and a highest always among them, the others evenly spaced.
    Fewer points than `limit` come back as they were (less any not finite)."""
    if limit < MIN_LIMIT:
        raise ValueError(f"a reduction keeps at least {MIN_LIMIT} points")
    finite = finite_points(points)
    n = len(finite)
    if n <= limit:
        return finite
    low = min(range(n), key=lambda i: finite[i][1])
    high = max(range(n), key=lambda i: finite[i][1])
    kept = {0, n - 1, low, high}
    others = [i for i in range(n) if i not in kept]
    spare = limit - len(kept)
    # Evenly spaced picks among the others: the stride is at least one, so no
    # two picks fall on the same point.
    if spare > 0:
        stride = len(others) / spare
        kept.update(others[int((k + 0.5) * stride)] for k in range(spare))
    return [finite[i] for i in sorted(kept)]
