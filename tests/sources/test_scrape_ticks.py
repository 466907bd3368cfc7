"""Scrape rounds on wall-clock ticks (adapter/sources/scrape_loop.py): replicas sample pods at the same
instants.

Rounds start at multiples of the interval on the source's clock, which is injected here with an
arbitrary offset from the real one (as another replica's clock would be), and a round that starts
on time is dated at its tick. The pod is a real aiohttp server on loopback.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter.config import ScrapeSettings
from adapter.sources.discovery import StaticDiscovery
from adapter.sources.scrape import ScrapeSource
from adapter.sources.scrape_loop import next_tick
from adapter.vocabulary import catalogue
from tests.sources.scrape_fleet import EVERYTHING, ServeApp, rounds
from tests.vllm_pages import PodLoad, page, pod_app

INTERVAL = 0.5  # a power of two: every tick is an exact binary fraction
OFFSET = 1234.3712  # the source's clock runs this far ahead of the real one
WAITING = catalogue.builtin("vllm_requests_waiting")


@settings(deadline=None)  # pure arithmetic; a loaded machine must not fail it on time
@given(
    now=st.floats(min_value=1e9, max_value=4e9, allow_nan=False),
    interval=st.floats(min_value=0.05, max_value=600.0, allow_nan=False),
)
def test_next_tick_is_the_next_multiple_strictly_after_now(now: float, interval: float) -> None:
    """The tick is after `now`, at most one interval later (to the precision of `now`), and a
    whole number of intervals."""
    tick = next_tick(now, interval)
    assert now < tick <= now + interval + 4 * math.ulp(now)
    assert abs(tick - round(tick / interval) * interval) <= 4 * math.ulp(tick)


@pytest.mark.parametrize(
    ("now", "expected"), [(100.0, 100.5), (100.2, 100.5), (100.4999, 100.5), (100.5, 101.0)]
)
def test_next_tick_examples(now: float, expected: float) -> None:
    """On a tick, the next one: a round never runs twice for one tick."""
    assert next_tick(now, INTERVAL) == expected


@pytest.fixture
async def pod_url(aiohttp_server: ServeApp) -> str:
    server = await aiohttp_server(pod_app(PodLoad("llama", waiting=2)))
    return str(server.make_url("/metrics"))


@pytest.fixture
async def source(pod_url: str) -> AsyncIterator[ScrapeSource]:
    scrape = ScrapeSettings(targets=(pod_url,), namespace="ml", interval=INTERVAL, timeout=0.4)
    made = ScrapeSource(
        scrape,
        discovery=StaticDiscovery([pod_url], "ml"),
        wall=lambda: time.time() + OFFSET,
    )
    await made.start()
    yield made
    await made.close()


async def test_rounds_are_dated_on_the_ticks_of_the_clock(source: ScrapeSource) -> None:
    """The first fetch of a metric scrapes at once (off the ticks, dated when it ran); from then
    on every round is dated at a multiple of the interval on the source's clock, one interval
    apart, so the served sample time only moves forward."""
    first = await source.fetch(WAITING, "ml", EVERYTHING)
    assert first.value == 2.0
    assert abs(first.timestamp - (time.time() + OFFSET)) < 1.0
    times = [first.timestamp]
    for _ in range(5):
        await rounds(source, 1)
        times.append((await source.fetch(WAITING, "ml", EVERYTHING)).timestamp)
    assert times == sorted(set(times)), times
    on_tick = [t for t in times[1:] if t / INTERVAL == int(t / INTERVAL)]
    # A round starting more than 10 % of the interval late (a very busy machine) is dated when
    # it really started; on loopback that is rare.
    assert len(on_tick) >= 3, times
    steps = [b - a for a, b in itertools.pairwise(on_tick)]
    assert all(step % INTERVAL == 0 for step in steps), steps


async def test_a_flapping_pod_never_moves_the_sample_time_back(aiohttp_server: ServeApp) -> None:
    """With `ignore-failed`, a pod failing every other scrape leaves and rejoins the value; the
    sample time (the oldest contributing scrape) still only moves forward, fetch after fetch."""
    answered = 0

    async def steady(request: web.Request) -> web.Response:
        return web.Response(text=page(PodLoad("llama", waiting=1)), content_type="text/plain")

    async def flapping(request: web.Request) -> web.Response:
        nonlocal answered
        answered += 1
        if answered % 2:
            return web.Response(status=500, text="engine restarting")
        return web.Response(text=page(PodLoad("llama", waiting=5)), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/steady/metrics", steady)
    app.router.add_get("/flapping/metrics", flapping)
    server = await aiohttp_server(app)
    urls = [str(server.make_url(f"/{name}/metrics")) for name in ("steady", "flapping")]
    scrape = ScrapeSettings(
        targets=tuple(urls), namespace="ml", interval=INTERVAL, timeout=0.4, on_partial="ignore-failed"
    )
    source = ScrapeSource(scrape, discovery=StaticDiscovery(urls, "ml"), wall=lambda: time.time() + OFFSET)
    await source.start()
    try:
        samples = [await source.fetch(WAITING, "ml", EVERYTHING)]
        for _ in range(6):
            await rounds(source, 1)
            samples.append(await source.fetch(WAITING, "ml", EVERYTHING))
    finally:
        await source.close()
    assert {s.value for s in samples} == {1.0, 6.0}, samples  # the pod did leave and rejoin
    times = [s.timestamp for s in samples]
    assert times == sorted(times), times
