"""Together's extend-expiry and checkpoint download, as the Together-shaped
server answers them (checked with Together's own SDK models, strictly, and
driven by Together's own client) and as the bot's client sends and reads them.
Fast: no bot process."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
import together
from together.types.post_training import ModelResources
from together.types.post_training.checkpoint_download_response import CheckpointDownloadResponse

from bot.commands.download import ADAPTER, MERGED
from bot.simulated import FakeTogether
from bot.together.client import TogetherClient
from bot.together.errors import TogetherError
from tests import together_fixtures
from tests.support.together_contract import KEY, ErrorBody, fetch, strict

fake = together_fixtures.fake
client = together_fixtures.client


def test_extend_expiry_answers_the_sdks_resource_and_refuses_one_not_ready(
    fake: FakeTogether,
) -> None:
    fake.reset_counts()
    fake.add_resource("x-ready", "READY", expires_at="2020-01-01T00:00:00Z")
    response = fetch(
        fake, "/rl/model-resources/x-ready/extend-expiry", method="POST", json={"seconds": 3600}
    )
    assert response.status_code == 200
    resource = strict(ModelResources, response)
    assert resource.expires_at is not None
    assert resource.expires_at > datetime.now(UTC) + timedelta(minutes=59)
    fake.add_resource("x-stopped", "STOPPED")
    refused = fetch(
        fake, "/rl/model-resources/x-stopped/extend-expiry", method="POST", json={"seconds": 60}
    )
    assert refused.status_code == 400
    body = ErrorBody.model_validate_json(refused.content, strict=True)
    assert "not ready" in body.error.message
    sdk = together.Together(api_key=KEY, base_url=fake.url, max_retries=0)
    kept = sdk.post_training.model_resources.extend_expiry("x-ready", seconds=7200)
    assert kept.expires_at is not None and kept.expires_at > resource.expires_at
    assert fake.extend_requests == [("x-ready", 3600), ("x-ready", 7200)]
    with pytest.raises(together.NotFoundError):
        sdk.post_training.model_resources.extend_expiry("x-gone", seconds=60)


def test_download_answers_the_sdks_files_for_inference_checkpoints_only(
    fake: FakeTogether,
) -> None:
    fake.reset_counts()
    session = fake.add("d-lora")
    inference = session["inference_checkpoints"][0]["id"]
    training = session["training_checkpoints"][0]["id"]
    path = f"/rl/checkpoints/{inference}/download?variant={ADAPTER}"
    files = strict(CheckpointDownloadResponse, fetch(fake, path))
    assert [f.filename for f in files.data] == ["adapter_model.safetensors", "adapter_config.json"]
    assert all(sig in f.url for f, sig in zip(files.data, fake.download_signatures, strict=True))
    sdk = together.Together(api_key=KEY, base_url=fake.url, max_retries=0)
    merged = sdk.post_training.checkpoints.download(inference, variant=MERGED)
    assert merged.data[0].filename.endswith(".safetensors")
    with pytest.raises(together.BadRequestError):
        sdk.post_training.checkpoints.download(training, variant=MERGED)
    fake.add("d-full", lora_config=None)
    full = fake.get("d-full")["inference_checkpoints"][0]["id"]  # type: ignore[index]
    with pytest.raises(together.BadRequestError):
        sdk.post_training.checkpoints.download(full, variant=ADAPTER)
    with pytest.raises(together.NotFoundError):
        sdk.post_training.checkpoints.download("ck-unknown", variant=MERGED)


async def test_the_bots_client_sends_and_reads_both(
    fake: FakeTogether, client: TogetherClient
) -> None:
    fake.add_resource("c-ready", "READY")
    kept = await client.extend_expiry("c-ready", 3600)
    assert kept.id == "c-ready" and kept.expires_at is not None
    sent = next(r for r in fake.requests if r.route == "resource_extend")
    assert json.loads(sent.body) == {"seconds": 3600}
    fake.add_resource("c-stopped", "STOPPED")
    with pytest.raises(TogetherError) as refused:
        await client.extend_expiry("c-stopped", 3600)
    assert refused.value.status == 400 and "not ready" in refused.value.together_message
    session = fake.add("c-lora")
    checkpoint = session["inference_checkpoints"][0]["id"]
    files = await client.checkpoint_files(checkpoint, ADAPTER)
    assert [f.filename for f in files] == ["adapter_model.safetensors", "adapter_config.json"]
    assert files[1].size == "812"  # the SDK's size is an int or a string
    assert fake.download_signatures[-1] in files[1].url
    assert fake.download_signatures[-1] not in repr(files) + str(files[1])
    asked = next(r for r in fake.requests if r.route == "checkpoint_download")
    assert parse_qs(urlsplit(asked.path).query) == {"variant": [ADAPTER]}
    with pytest.raises(TogetherError) as bad:
        await client.checkpoint_files("../x", MERGED)
    assert bad.value.kind == "invalid_id"
