"""Fixtures of the source tests: fake vLLM pods and scrape sources built as production builds them,
and a fake Prometheus HTTP API (tests/sources/prometheus_fake.py)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.typedefs import Handler

from adapter.config import PrometheusSettings, load
from adapter.sources.prometheus import PrometheusSource
from adapter.sources.scrape import ScrapeSource, make_scrape_source
from adapter.telemetry import Telemetry
from tests.sources.prometheus_fake import Seen, StartProm
from tests.sources.scrape_fleet import INTERVAL, TIMEOUT, Fleet, MakeSource, ServeApp


@pytest.fixture
async def fleet(aiohttp_server: ServeApp) -> Fleet:
    """Fake vLLM pods behind one loopback server."""
    fleet = Fleet()
    app = web.Application()
    app.router.add_get("/{pod}/metrics", fleet.handle)
    server = await aiohttp_server(app)
    fleet.base = str(server.make_url("")).rstrip("/")
    return fleet


@pytest.fixture
async def make_source() -> AsyncIterator[MakeSource]:
    """Build (from a config, as production does) and start scrape sources; close them all after."""
    sources: list[ScrapeSource] = []

    async def make(
        targets: list[str],
        *,
        on_partial: str = "error",
        interval: float = INTERVAL,
        per_pod: float = TIMEOUT,
        limit: int | None = None,
        telemetry: Telemetry | None = None,
    ) -> ScrapeSource:
        scrape: dict[str, Any] = {
            "targets": targets,
            "namespace": "ml",
            "interval": interval,
            "timeout": per_pod,
            "max_age": max(1.0, interval),
            "on_partial": on_partial,
        }
        if limit is not None:
            scrape["max_body_bytes"] = limit
        config = load(json.dumps({"source": "scrape", "scrape": scrape}))
        source = make_scrape_source(config, telemetry or Telemetry())
        sources.append(source)
        await source.start()
        return source

    yield make
    for source in sources:
        await source.close()


@pytest.fixture
def prom(aiohttp_server: ServeApp) -> StartProm:
    """Start a fake Prometheus HTTP API with the given handler; return a source pointed at it and
    the requests it saw."""

    async def start(
        handler: Handler,
        wall: Callable[[], float] | None = None,
        **settings: Any,
    ) -> tuple[PrometheusSource, list[Seen]]:
        seen: list[Seen] = []

        async def recording(request: web.Request) -> web.StreamResponse:
            form = await request.post()
            query, at = form.get("query"), form.get("time")
            assert isinstance(query, str) and isinstance(at, str | None)
            seen.append(Seen(query, at, dict(request.headers)))
            return await handler(request)

        app = web.Application()
        app.router.add_post("/api/v1/query", recording)
        server = await aiohttp_server(app)
        url = f"http://127.0.0.1:{server.port}"
        source = PrometheusSource(PrometheusSettings(url=url, **settings), wall=wall or time.time)
        await source.start()
        return source, seen

    return start
