"""The demo's Download link serves the simulated storage's file only for the path
its signature was handed out for, as a presigned URL does. Fast: the page's
storage route over HTTP (in process) and a Together-shaped server that signs the
links, no demo process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from urllib.parse import urlsplit

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.commands.download import ADAPTER
from bot.demo.links import STORAGE_PATH, storage_file
from bot.simulated import FakeTogether
from tests.support.together_contract import fetch

PAGE = "http://127.0.0.1:1"


@pytest.fixture
async def signed() -> AsyncIterator[tuple[httpx.AsyncClient, list[str]]]:
    """The page's storage route, and the paths (with query) of two signed files."""
    with FakeTogether() as fake:
        fake.download_host = f"{PAGE}{STORAGE_PATH}"
        checkpoint = fake.add("links")["inference_checkpoints"][0]["id"]
        files = fetch(fake, f"/rl/checkpoints/{checkpoint}/download?variant={ADAPTER}").json()
        world = SimpleNamespace(together=fake)

        async def storage(request: Request) -> Response:
            return storage_file(world, request)  # type: ignore[arg-type]

        app = Starlette(routes=[Route(STORAGE_PATH + "/ckpt/{checkpoint}/{name}", storage)])
        urls = [urlsplit(f["url"]) for f in files["data"]]
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=PAGE) as client:
            yield client, [f"{url.path}?{url.query}" for url in urls]


async def test_a_signed_link_serves_its_own_file(
    signed: tuple[httpx.AsyncClient, list[str]],
) -> None:
    client, paths = signed
    for path in paths:
        got = await client.get(path)
        assert got.status_code == 200 and "of checkpoint" in got.text


@pytest.mark.parametrize(
    "name",
    ["other-file.bin", "%F0%9F%9A%80", "a%0D%0ASet-Cookie:%20x=1", "..%2F..%2Fetc%2Fpasswd"],
)
async def test_a_signature_serves_no_other_path(
    signed: tuple[httpx.AsyncClient, list[str]], name: str
) -> None:
    """A signature handed out for one file opened any checkpoint and any name, and a
    name Latin-1 cannot carry in the header was a 500."""
    client, paths = signed
    path, _, query = paths[0].partition("?")
    forged = f"{path.rsplit('/', 1)[0]}/{name}?{query}"
    got = await client.get(forged)
    assert got.status_code in (403, 404), (forged, got.status_code, got.headers)
    assert "of checkpoint" not in got.text
    other_checkpoint = path.replace("/ckpt/", "/ckpt/x", 1)
    assert (await client.get(f"{other_checkpoint}?{query}")).status_code == 403
