"""Shared fixtures: the real application assembled around a FakeSource."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from adapter.app import create_app
from adapter.config import load
from tests.fakes import FakeSource

#: a test client of the real application
Client = TestClient[web.Request, web.Application]
MakeClient = Callable[..., Awaitable[tuple[Client, FakeSource]]]


@pytest.fixture
def make_client(aiohttp_client: Any) -> MakeClient:
    """Build the real app (create_app) with a FakeSource and return (client, source)."""

    async def make(config_text: str = "", source: FakeSource | None = None) -> tuple[Client, FakeSource]:
        fake = source or FakeSource()
        app = create_app(load(config_text), source=fake)
        client: Client = await aiohttp_client(app)
        return client, fake

    return make
