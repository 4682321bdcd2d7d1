"""The resource line every `/rl-session <id>` card carries, watched or not:
the model resource's status, GPU type and count, replicas, when it stops if
inactive, and its price per hour. Pure, like all of `bot.rendering`."""

from __future__ import annotations

from bot.rendering.blocks import MAX_BLOCKS, Message, section_block
from bot.rendering.text import inert
from bot.rendering.words import money_words, resource_status_words, slack_date
from bot.training.resources import CostEstimate, ModelResource
from bot.training.status import ResourceStatus

RESOURCE_LINE = "rl_resource_line"


def gpu_count_words(resource: ModelResource) -> str | None:
    """`H100-80GB ×3 (trainer + 2 generator replicas)`: one GPU group for the
    trainer and one per generator replica, as Together prices them."""
    replicas = resource.replicas
    gpu = inert(resource.gpu_type, 40, default="GPU")
    if replicas is None or not 0 <= replicas < 10**6:
        return gpu if resource.gpu_type else None
    if replicas == 0:
        return f"{gpu} ×1 (trainer only)"
    return f"{gpu} ×{replicas + 1} (trainer + {replicas} generator replica{'s' * (replicas != 1)})"


def resource_line(resource: ModelResource, price: CostEstimate | None) -> str:
    """One line: `*Resource:* 🟢 Ready · H100-80GB ×3 (…) · stops if inactive at … · $12.00/h`."""
    parts = [resource_status_words(resource)]
    gpus = gpu_count_words(resource)
    if gpus:
        parts.append(gpus)
    queue = resource.queue_position
    if queue is not None and resource.status_enum is ResourceStatus.PENDING:
        parts.append(f"queue position {inert(queue, 20)}")
    if resource.expires_at is not None and resource.status_enum is ResourceStatus.READY:
        parts.append(f"stops if inactive at {slack_date(resource.expires_at)}")
    per_hour = money_words(price.price_per_hour, price.currency) if price is not None else None
    if per_hour is not None:
        parts.append(f"{per_hour}/h")
    return "*Resource:* " + " · ".join(parts)


def with_resource_line(
    card: Message, resource: ModelResource, price: CostEstimate | None
) -> Message:
    """The card with its resource line before its buttons (or at the end),
    replacing one already there."""
    line = {**section_block(resource_line(resource, price)), "block_id": RESOURCE_LINE}
    blocks = [b for b in card["blocks"] if b.get("block_id") != RESOURCE_LINE]
    if len(blocks) >= MAX_BLOCKS:
        return card
    at = next((i for i, b in enumerate(blocks) if b.get("type") == "actions"), len(blocks))
    blocks.insert(at, line)
    return {**card, "blocks": blocks}
