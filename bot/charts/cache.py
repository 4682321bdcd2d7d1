"""Charts already drawn, per (session, last step, what is drawn): a repeated click
costs no W&B request and no new render.

In memory, per process, and bounded: a few dozen PNGs of a few hundred KB. A
replica that has not drawn a chart draws it once itself.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

MAX_CHARTS = 32

CacheKey = tuple[str, int | None, tuple[str, ...], int]


@dataclass(frozen=True)
class Chart:
    """A drawn chart and the words that go with it."""

    png: bytes
    title: str
    #: the message beside the image (mrkdwn)
    text: str
    #: the image's alt text: the same facts, plain
    alt: str
    #: whether W&B metrics are drawn (else the bot's own progress)
    metrics: bool = False

    @property
    def filename(self) -> str:
        return "chart.png"


class ChartCache:
    def __init__(self, size: int = MAX_CHARTS) -> None:
        self._size = size
        self._charts: OrderedDict[CacheKey, Chart] = OrderedDict()
        self.hits = 0

    def get(self, key: CacheKey) -> Chart | None:
        chart = self._charts.get(key)
        if chart is not None:
            self._charts.move_to_end(key)
            self.hits += 1
        return chart

    def put(self, key: CacheKey, chart: Chart) -> None:
        self._charts[key] = chart
        self._charts.move_to_end(key)
        while len(self._charts) > self._size:
            self._charts.popitem(last=False)


_shared: ChartCache | None = None


def shared_cache() -> ChartCache:
    """The process's cache, made on first use: the command, the button and the
    automatic charts all draw through it."""
    global _shared
    if _shared is None:
        _shared = ChartCache()
    return _shared
