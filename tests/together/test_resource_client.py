"""The bot's Together client for model resources, against the
Together-shaped server over real sockets: what it sends, what it parses.
Fast: no bot process."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest

from bot.simulated import FakeTogether
from bot.simulated.together import DEFAULT_PRICES
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from bot.training.resources import ModelResource
from bot.training.status import ResourceStatus
from tests import together_fixtures

# the shared Together server and client fixtures (pytest finds them by these names)
fake = together_fixtures.fake
client = together_fixtures.client

READY = "MODEL_RESOURCES_STATUS_READY"


async def test_get_model_resource_parses_every_field(
    fake: FakeTogether, client: TogetherClient
) -> None:
    fake.add_resource("r-pending", "PENDING", base_weights_ref="ml_base@rv_1")
    fake.set_resource("r-pending", queue_position=4)
    pending = await client.get_model_resource("r-pending")
    assert pending.status_enum is ResourceStatus.PENDING
    assert pending.queue_position == 4 and pending.expires_at is None
    assert pending.gpu_type == "H100-80GB" and pending.replicas == 1
    assert pending.inactive_timeout == 3600 and pending.base_weights_ref == "ml_base@rv_1"
    fake.set_resource("r-pending", "READY", expires_at="2026-01-02T03:04:05Z")
    ready = await client.get_model_resource("r-pending")
    assert ready.status_enum is ResourceStatus.READY and ready.queue_position is None
    assert ready.expires_at is not None and ready.expires_at.isoformat() == (
        "2026-01-02T03:04:05+00:00"
    )
    fake.add_resource("r-error", "ERROR")
    broken = await client.get_model_resource("r-error")
    assert broken.error is not None and broken.error.code is not None


async def test_a_session_resource_and_unknown_ids(
    fake: FakeTogether, client: TogetherClient
) -> None:
    session = fake.add("s-1")
    resource = await client.get_model_resource(session["model_resources_id"])
    assert resource.base_model == session["base_model"]
    with pytest.raises(TogetherError) as missing:
        await client.get_model_resource("nope")
    assert missing.value.kind == "not_found"
    with pytest.raises(TogetherError) as bad:
        await client.get_model_resource("../sessions")
    assert bad.value.kind == "invalid_id"


async def test_odd_resource_fields_are_tolerated(
    fake: FakeTogether, client: TogetherClient
) -> None:
    fake.add_resource(
        "r-odd",
        "MODEL_RESOURCES_STATUS_HIBERNATING",
        compute_config={"num_generator_replicas": "2", "gpu_type": 7},
        status_details="soon",
        inactive_timeout="not a number",
        expires_at="tomorrow",
    )
    odd = await client.get_model_resource("r-odd")
    assert odd.status_enum is ResourceStatus.UNKNOWN
    assert odd.replicas == 2 and odd.gpu_type is None
    assert odd.queue_position is None and odd.inactive_timeout is None and odd.expires_at is None


async def test_list_model_resources_follows_meta_pages_with_status_filters(
    fake: FakeTogether, client: TogetherClient
) -> None:
    for i in range(5):
        fake.add_resource(f"rl-{i}", "READY" if i != 2 else "STOPPED")
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page, cursor = await client.list_model_resources(status=[READY], after=cursor, limit=2)
        pages += 1
        seen += [r.id for r in page]
        if cursor is None:
            break
    assert seen == ["rl-0", "rl-1", "rl-3", "rl-4"] and pages == 2
    query = parse_qs(urlsplit(fake.paths[0]).query)
    assert query["status[]"] == [READY] and query["limit"] == ["2"]


async def test_estimate_cost_sends_the_resources_own_fields(
    fake: FakeTogether, client: TogetherClient
) -> None:
    fake.add_resource(
        "r-b200", compute_config={"gpu_type": "B200-SXM", "num_generator_replicas": 3}
    )
    resource = await client.get_model_resource("r-b200")
    estimate = await client.estimate_cost(resource)
    assert estimate.currency == "USD"
    assert estimate.price_per_hour == pytest.approx(4 * DEFAULT_PRICES["B200-SXM"])
    sent = fake.estimate_requests[-1]
    assert sent["base_model"] == "Qwen/Qwen3.5-4B"
    assert sent["compute_config"] == {"gpu_type": "B200-SXM", "num_generator_replicas": 3}
    assert sent["inactive_timeout"] == 3600 and sent["lora_enabled"] is True
    assert sent["optimizer_config"] == {"adam": {}}


async def test_estimate_cost_refuses_a_garbage_price(
    fake: FakeTogether, client: TogetherClient
) -> None:
    resource = ModelResource(id="r-x", base_model="m")
    for body in ('{"currency": "USD", "price_per_hour": -3}', '{"currency": "USD"}', "[1]"):
        fake.fail(None, body=body, times=1)
        with pytest.raises(TogetherError) as bad:
            await client.estimate_cost(resource)
        assert bad.value.kind == "bad_response"


async def test_stop_model_resource_sends_force_in_body_and_query(
    fake: FakeTogether, client: TogetherClient
) -> None:
    session = fake.add("s-live", "RUNNING")
    resource_id = session["model_resources_id"]
    with pytest.raises(TogetherError) as refused:
        await client.stop_model_resource(resource_id)
    assert refused.value.kind == "bad_response" and refused.value.status == 400
    assert "still active" in refused.value.detail
    stopped = await client.stop_model_resource(resource_id, force=True)
    assert stopped.status_enum is ResourceStatus.STOPPING
    assert fake.resource_stop_requests == [(resource_id, True)]
    posts = [r for r in fake.requests if r.method == "POST"]
    assert [parse_qs(urlsplit(r.path).query)["force"] for r in posts] == [["false"], ["true"]]
    assert [json.loads(r.body) for r in posts] == [{"force": False}, {"force": True}]
    assert fake.get("s-live")["status"] == "TRAINING_SESSION_STATUS_STOPPING"  # type: ignore[index]


async def test_a_stop_together_accepted_is_none_when_its_state_cannot_be_read(
    fake: FakeTogether, client: TogetherClient
) -> None:
    """A 2xx stop is a stop, whatever its body; its state is then read, and
    when that read fails too the answer is None (accepted, state unknown)."""
    session = fake.add("s-odd", "RUNNING")
    fake.fail("s-odd", route="stop", body="[]", after=True, times=1)
    read = await client.stop_session("s-odd")  # the odd answer, then a good read
    assert read is not None and read.status == "TRAINING_SESSION_STATUS_STOPPING"
    fake.fail("s-odd", route="get", status=503)
    for body in ('{"accepted": true}', "<html>OK</html>", ""):
        fake.fail("s-odd", route="stop", body=body, after=True, times=1)
        assert await client.stop_session("s-odd") is None
    fake.clear_faults()
    resource_id = session["model_resources_id"]
    fake.set_status("s-odd", "STOPPED")
    fake.fail(resource_id, route="resource", status=404)  # gone by the time it is read
    fake.fail(resource_id, route="resource_stop", body="<html/>", after=True, times=1)
    assert await client.stop_model_resource(resource_id) is None
    assert fake.stop_requests == ["s-odd"] * 4
    assert fake.resource_stop_requests == [(resource_id, False)]
