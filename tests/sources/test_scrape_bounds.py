"""A pod's `/metrics` is read within bounds: at most `scrape.max_body_bytes`, within the per-pod timeout.

Misbehaving pods are real HTTP servers on loopback (aiohttp, bound by pytest-aiohttp): one streams
an endless page, one declares a 256 MiB page, one sends a gzip bomb, one trickles a byte at a time.
Each must fail only its own scrape, with a clear cause, without the adapter reading the rest: the
server sees its connection closed, and the memory the scrape allocated (tracemalloc) stays near the
limit, not near the page.
"""

from __future__ import annotations

import asyncio
import gzip
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from adapter.errors import PartialFailure
from adapter.vocabulary import catalogue
from tests.sources.scrape_fleet import EVERYTHING, MakeSource, ServeApp, rounds
from tests.vllm_pages import PodLoad, page

LIMIT = 1024 * 1024
INTERVAL = 2.0
TIMEOUT = 2.0  # generous: in these tests the size limit, not the clock, must end a fast page
# The settings of every source here (the `make_source` fixture's keywords) unless a test says otherwise.
BOUNDED: dict[str, float] = {"interval": INTERVAL, "per_pod": TIMEOUT, "limit": LIMIT}
WAITING = catalogue.builtin("vllm_requests_waiting")
# Lines of a valid exposition, so only the size can be what fails.
FILLER = b'vllm:num_requests_waiting{engine="0",model_name="filler"} 1.0\n' * 1024
# Loopback socket buffers hold a few MiB that the server may hand to the kernel before it learns
# that the client is gone; anything beyond that would mean the adapter kept reading.
SLACK = 4 * 1024 * 1024


@dataclass
class Served:
    """What a misbehaving pod did: bytes handed to the transport, and whether the client left."""

    sent: int = 0
    closed: asyncio.Event = field(default_factory=asyncio.Event)


PodBehaviour = Callable[[web.Request, Served], Awaitable[web.StreamResponse]]


async def _stream(request: web.Request, served: Served, response: web.StreamResponse, chunks: Any) -> None:
    """Write `chunks` until they end or the client goes away (which is recorded)."""
    await response.prepare(request)
    try:
        for chunk in chunks:
            if request.transport is None or request.transport.is_closing():
                break
            await response.write(chunk)
            served.sent += len(chunk)
            await asyncio.sleep(0)
    except (ConnectionError, RuntimeError):
        pass
    finally:
        served.closed.set()


async def endless(request: web.Request, served: Served) -> web.StreamResponse:
    """A valid exposition that never ends (chunked, no Content-Length)."""
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await _stream(request, served, response, iter(lambda: FILLER, None))
    return response


async def declared_huge(request: web.Request, served: Served) -> web.StreamResponse:
    """A 256 MiB page announced in Content-Length, produced lazily."""
    size = 256 * 1024 * 1024
    response = web.StreamResponse(headers={"Content-Type": "text/plain", "Content-Length": str(size)})
    await _stream(request, served, response, (FILLER for _ in range(size // len(FILLER))))
    return response


BOMB = gzip.compress(FILLER * 64, 9)  # 64 KiB of lines per member, ~100 bytes compressed


async def gzip_bomb(request: web.Request, served: Served) -> web.StreamResponse:
    """A small gzip body that inflates without end (one member after another)."""
    response = web.StreamResponse(headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"})
    await _stream(request, served, response, iter(lambda: BOMB, None))
    return response


async def trickle(request: web.Request, served: Served) -> web.StreamResponse:
    """Headers at once, then one byte of a valid page every 20 ms: each read is quick, the page never ends."""
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})

    def slowly() -> Any:
        for byte in FILLER * 100:
            yield bytes([byte])

    async def paced(request: web.Request, served: Served) -> None:
        await response.prepare(request)
        try:
            for chunk in slowly():
                await response.write(chunk)
                served.sent += 1
                await asyncio.sleep(0.02)
        except (ConnectionError, RuntimeError):
            pass
        finally:
            served.closed.set()

    await paced(request, served)
    return response


def exact(size: int) -> PodBehaviour:
    """A valid page of exactly `size` bytes (padded with a comment)."""
    text = page(PodLoad("llama", waiting=3)).encode()
    body = text + b"# " + b"x" * (size - len(text) - 3) + b"\n"
    assert len(body) == size

    async def handle(request: web.Request, served: Served) -> web.StreamResponse:
        served.sent = len(body)
        return web.Response(body=body, content_type="text/plain")

    return handle


class Pods:
    """Loopback pods at `/<name>/metrics`, each with a handler and a record of what it served."""

    def __init__(self) -> None:
        self.handlers: dict[str, PodBehaviour] = {}
        self.served: dict[str, Served] = {}
        self.base = ""

    def add(self, name: str, handler: PodBehaviour) -> str:
        self.handlers[name] = handler
        self.served[name] = Served()
        return f"{self.base}/{name}/metrics"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["pod"]
        return await self.handlers[name](request, self.served[name])


async def healthy(request: web.Request, served: Served) -> web.StreamResponse:
    return web.Response(text=page(PodLoad("llama", waiting=1)), content_type="text/plain")


@pytest.fixture
async def pods(aiohttp_server: ServeApp) -> Pods:
    made = Pods()
    app = web.Application()
    app.router.add_get("/{pod}/metrics", made.handle)
    server = await aiohttp_server(app)
    made.base = str(server.make_url("")).rstrip("/")
    return made


async def closed_within(served: Served, seconds: float) -> None:
    """Wait until the pod saw its client leave; fail after `seconds`."""
    try:
        await asyncio.wait_for(served.closed.wait(), seconds)
    except TimeoutError:
        pytest.fail(f"the pod kept serving: {served.sent} bytes sent and the connection still open")


@pytest.mark.parametrize(
    "handler", [endless, declared_huge, gzip_bomb], ids=["endless page", "declared 256 MiB", "gzip bomb"]
)
async def test_a_page_past_the_limit_fails_that_pod_unread(
    pods: Pods, make_source: MakeSource, handler: PodBehaviour
) -> None:
    """The oversized pod's scrape fails with "page larger than N bytes" and its connection is
    dropped, not drained; the healthy pod is unaffected (ignore-failed would serve it)."""
    good = pods.add("good", healthy)
    bad = pods.add("bad", handler)
    source = await make_source([good, bad], **BOUNDED)
    started = time.monotonic()
    with pytest.raises(
        PartialFailure, match=rf"{bad}: page larger than {LIMIT} bytes \(scrape\.max_body_bytes\)"
    ):
        await source.fetch(WAITING, "ml", EVERYTHING)
    assert time.monotonic() - started < INTERVAL + TIMEOUT
    await closed_within(pods.served["bad"], TIMEOUT)
    assert pods.served["bad"].sent < LIMIT + SLACK


async def test_a_slow_page_is_cut_by_the_per_pod_timeout(pods: Pods, make_source: MakeSource) -> None:
    """Headers come at once and bytes keep coming, but the timeout covers the whole body: the
    scrape fails after 0.5 s, whatever the pace of the reads."""
    source = await make_source(
        [pods.add("good", healthy), (slow := pods.add("slow", trickle))], **{**BOUNDED, "per_pod": 0.5}
    )
    started = time.monotonic()
    with pytest.raises(PartialFailure, match=rf"{slow}: timed out after 0\.5s"):
        await source.fetch(WAITING, "ml", EVERYTHING)
    assert time.monotonic() - started < INTERVAL + 0.5 + 1.0
    await closed_within(pods.served["slow"], 2.0)
    assert pods.served["slow"].sent < 100  # ~25 bytes in 0.5 s


async def test_a_page_of_exactly_the_limit_is_read(pods: Pods, make_source: MakeSource) -> None:
    """The limit is inclusive: a page of `max_body_bytes` is served, one byte more is not."""
    size = 64 * 1024
    fits = pods.add("fits", exact(size))
    source = await make_source([fits], **{**BOUNDED, "limit": size})
    assert (await source.fetch(WAITING, "ml", EVERYTHING)).value == 3.0
    over = pods.add("over", exact(size + 1))
    source = await make_source([fits, over], **{**BOUNDED, "limit": size})
    with pytest.raises(PartialFailure, match=rf"{over}: page larger than {size} bytes"):
        await source.fetch(WAITING, "ml", EVERYTHING)


async def test_memory_stays_near_the_limit(pods: Pods, make_source: MakeSource) -> None:
    """Rounds against an endless page allocate about the limit, not the page: the peak Python
    allocation (tracemalloc, server included) stays under three times the limit."""
    source = await make_source([pods.add("endless", endless)], **BOUNDED)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        baseline, _ = tracemalloc.get_traced_memory()
        await rounds(source, 3, within=10.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - baseline < 3 * LIMIT, f"peak {peak - baseline} bytes above baseline"
