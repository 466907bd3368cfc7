"""Fake vLLM pods on loopback for the scrape source's tests, and waiting for its rounds.

Each fake pod is a route of a real aiohttp server (bound to port 0 by pytest-aiohttp) serving a
vLLM-format page built with prometheus_client (tests/vllm_pages.py), whose counters grow linearly so
every rate, mean and quantile is known exactly. A pod can be made dead (a closed port), slow,
reset mid-body, or to answer garbage. The fixtures that start them are in tests/sources/conftest.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.test_utils import TestServer

from adapter.sources.scrape import ScrapeSource
from adapter.vocabulary import catalogue, selectors
from adapter.vocabulary.catalogue import MetricDef
from tests.integration.procs import free_port
from tests.vllm_pages import PodLoad, page
from tests.waiting import until

# Generous for loopback pods on a loaded 2-core CI machine: a tighter per-pod timeout made healthy
# pods miss rounds when the whole suite ran at once.
INTERVAL = 0.5
TIMEOUT = 0.4
EVERYTHING = selectors.parse("")

#: pytest-aiohttp's `aiohttp_server`: start an application on a free loopback port
ServeApp = Callable[[web.Application], Awaitable[TestServer]]
#: `make_source(targets, *, on_partial=, interval=, per_pod=, limit=, telemetry=)`: a started source
MakeSource = Callable[..., Awaitable[ScrapeSource]]


@dataclass
class FakePod:
    """What one pod answers on `/<name>/metrics`."""

    load: PodLoad
    behaviour: str = "ok"
    delay: float = 0.0


class Fleet:
    """Fake vLLM pods behind one loopback server; `url(name)` is a pod's metrics URL."""

    def __init__(self) -> None:
        self.pods: dict[str, FakePod] = {}
        self.base = ""

    def add(self, name: str, load: PodLoad) -> str:
        """A pod answering `load`'s page; returns its URL."""
        self.pods[name] = FakePod(load)
        return self.url(name)

    def url(self, name: str) -> str:
        """The metrics URL of pod `name`."""
        return f"{self.base}/{name}/metrics"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer as the named pod's `behaviour` says, after its `delay` (a slow pod)."""
        pod = self.pods[request.match_info["pod"]]
        if pod.delay:
            await asyncio.sleep(pod.delay)
        text = page(pod.load)
        match pod.behaviour:
            case "ok":
                return web.Response(text=text, content_type="text/plain")
            case "http-500":
                return web.Response(status=500, text="engine dead")
            case "html":
                return web.Response(text="<html>login</html>", content_type="text/html")
            case "html-as-text":
                return web.Response(text="<!DOCTYPE html><html>proxy error</html>", content_type="text/plain")
            case "malformed":
                return web.Response(
                    text=text + 'vllm:num_requests_running{engine="1"} lots\n', content_type="text/plain"
                )
            case "not-utf8":
                return web.Response(body=b"vllm:num_requests_running \xff\xfe 1\n", content_type="text/plain")
            case "reset":
                response = web.StreamResponse(
                    headers={"Content-Type": "text/plain", "Content-Length": "100000"}
                )
                await response.prepare(request)
                await response.write(text[:1000].encode())
                assert request.transport is not None
                request.transport.abort()  # the pod vanishes mid-body
                return response
        raise AssertionError(pod.behaviour)


def dead_url() -> str:
    """A loopback URL whose port was free a moment ago: connections are refused."""
    return f"http://127.0.0.1:{free_port()}/metrics"


def metric(name: str) -> MetricDef:
    """The built-in metric `name`."""
    return catalogue.builtin(name)


async def rounds(source: ScrapeSource, count: int, within: float = 5.0) -> None:
    """Wait (with a deadline) until `count` more scrape rounds have finished."""
    target = source.rounds + count
    await until(lambda: source.rounds >= target, within, f"{count} more scrape rounds (to {target})")
