"""Model resources and prices read lately, shared in one process by the spend
watch's reads (`bot.alerts.resource_reader`) and the cards people ask for: a
card asked for right after the poller read its resource costs no request, and
a card's read serves the next cycle of the spend watch the same way.

Times are this process's monotonic clock; nothing here is stored.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from bot.together.errors import TogetherError
from bot.together.resources import ModelResourceEndpoints
from bot.training.resources import CostEstimate, ModelResource

#: how long a price is reused for the same resource shape (Together's price rarely changes)
PRICE_TTL_SECONDS = 3600.0


def shape_key(resource: ModelResource) -> str:
    """What a price depends on: the resource's own layout (its `estimate-cost` body)."""
    return json.dumps(resource.estimate_body(), sort_keys=True)


class ResourceCache:
    """Resource reads by id and prices by shape, each with when it was taken."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.reads: dict[str, tuple[ModelResource, float]] = {}
        self.prices: dict[str, tuple[CostEstimate, float]] = {}

    def fresh(self, resource_id: str, max_age: float) -> ModelResource | None:
        read = self.reads.get(resource_id)
        if read is None or self.clock() - read[1] >= max_age:
            return None
        return read[0]

    async def resource(
        self, together: ModelResourceEndpoints, resource_id: str, *, max_age: float
    ) -> ModelResource:
        """The resource as read within `max_age` seconds, else read now (and kept).
        Raises TogetherError."""
        kept = self.fresh(resource_id, max_age)
        if kept is not None:
            return kept
        got = await together.get_model_resource(resource_id, max_wait=5)
        self.reads[resource_id] = (got, self.clock())
        return got

    async def price(
        self, together: ModelResourceEndpoints, resource: ModelResource
    ) -> CostEstimate | None:
        """Its price per hour, from a pricing of the same shape within the hour,
        else asked now (None when Together cannot say)."""
        shape = shape_key(resource)
        cached = self.prices.get(shape)
        if cached is not None and self.clock() - cached[1] < PRICE_TTL_SECONDS:
            return cached[0]
        try:
            price = await together.estimate_cost(resource)
        except TogetherError:
            return cached[0] if cached is not None else None
        self.prices.pop(shape, None)  # kept in the order priced: the oldest first
        self.prices[shape] = (price, self.clock())
        return price
