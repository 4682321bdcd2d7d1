"""Fixtures for fast tests of the bot's own Together client against the Together-shaped
server: one server a module, and a client on a wiped server for each test. Import both
names into a test module to use them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from bot.simulated import FakeTogether
from bot.together.client import TogetherClient


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeTogether]:
    with FakeTogether() as server:
        yield server


@pytest.fixture
async def client(fake: FakeTogether) -> AsyncIterator[TogetherClient]:
    """No sessions, resources, faults or counted requests left from an earlier test."""
    with fake._lock:
        fake.sessions.clear()
        fake.resources.clear()
    fake.clear_faults()
    fake.reset_counts()
    async with httpx.AsyncClient() as http:
        yield TogetherClient(http, base_url=fake.base_url, api_key=fake.api_key)
