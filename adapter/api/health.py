"""Probes and the adapter's own `/metrics`.

`/healthz` and `/livez` answer while the event loop runs. `/readyz` answers 200 only once the source
has answered a query (a ping or a refresh), so a Service does not route the aggregator to an adapter
that has never reached its source.
"""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from adapter.api.routes import TELEMETRY

READY: Final = web.AppKey("ready", asyncio.Event)


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def readyz(request: web.Request) -> web.Response:
    if request.app[READY].is_set():
        return web.Response(text="ok")
    return web.Response(status=503, text="the metrics source has not answered yet")


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[TELEMETRY].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def add_routes(app: web.Application) -> None:
    """Register the probe and self-metrics routes."""
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
