"""The value cache: single flight, background refresh on wall-clock ticks, idle expiry, failures
replace values. Background refreshes are stepped with an injected sleep (`tests.fakes.Ticker`), so
no test waits in real time for the cache to do something."""

from __future__ import annotations

import asyncio

import pytest

from adapter.cache import ValueCache, until_next_tick
from adapter.errors import NoTargets, SourceUnavailable, TooManyKeys
from adapter.sources import Sample
from tests.fakes import Ticker
from tests.waiting import until


class CountingFetch:
    def __init__(self, delay: float = 0.0) -> None:
        self.calls = 0
        self.delay = delay
        self.fail_with: Exception | None = None

    async def __call__(self) -> Sample:
        self.calls += 1
        await asyncio.sleep(self.delay)
        if self.fail_with is not None:
            raise self.fail_with
        return Sample(float(self.calls), 1000.0 + self.calls)


async def test_concurrent_first_requests_share_one_fetch() -> None:
    """Fifty simultaneous requests for a new key cost exactly one upstream fetch."""
    cache = ValueCache(refresh_interval=60, idle_timeout=60)
    fetch = CountingFetch(delay=0.05)
    try:
        results = await asyncio.gather(*(cache.get("k", fetch) for _ in range(50)))
    finally:
        await cache.close()
    assert fetch.calls == 1
    assert {outcome for outcome, _hit in results} == {Sample(1.0, 1001.0)}
    assert sum(hit for _o, hit in results) == 0, "nobody found a value before the first fetch completed"


async def test_later_requests_are_hits_and_background_refresh_updates() -> None:
    """After the first fetch, reads are hits and the refresher replaces the value on each tick."""
    ticker = Ticker()
    cache = ValueCache(refresh_interval=5, idle_timeout=60, wall=ticker, sleep=ticker.sleep)
    fetch = CountingFetch()
    try:
        first, hit = await cache.get("k", fetch)
        assert (first, hit) == (Sample(1.0, 1001.0), False)
        await ticker.tick()
        await ticker.tick()
        later, hit = await cache.get("k", fetch)
    finally:
        await cache.close()
    assert hit is True
    assert later == Sample(3.0, 1003.0)
    assert fetch.calls == 3


async def test_a_failed_refresh_replaces_the_previous_value() -> None:
    """A source that goes down is never hidden behind the value from before it did."""
    ticker = Ticker()
    cache = ValueCache(refresh_interval=5, idle_timeout=60, wall=ticker, sleep=ticker.sleep)
    fetch = CountingFetch()
    try:
        await cache.get("k", fetch)
        fetch.fail_with = SourceUnavailable("down")
        await ticker.tick()
        outcome, _ = await cache.get("k", fetch)
    finally:
        await cache.close()
    assert isinstance(outcome, SourceUnavailable)


@pytest.mark.parametrize(
    ("now", "interval", "expected"),
    [(1003.7, 5.0, 1.35), (1005.0, 5.0, 5.05), (0.0, 1.0, 1.01), (59.99, 60.0, 0.61)],
)
def test_refreshes_wake_just_after_wall_clock_ticks(now: float, interval: float, expected: float) -> None:
    """The next refresh is just after the next multiple of the interval, whenever the fetch ended."""
    assert until_next_tick(now, interval) == pytest.approx(expected)


async def test_two_replicas_refresh_on_the_same_ticks() -> None:
    """Two caches (two adapter replicas) whose first fetches happened at different moments ask to
    wake at the same wall-clock instants, so their sources are asked at the same ticks."""
    wakeups = []
    for started in (1001.2, 1003.9):
        ticker = Ticker(wall=started)
        cache = ValueCache(refresh_interval=5, idle_timeout=60, wall=ticker, sleep=ticker.sleep)
        try:
            await cache.get("k", CountingFetch())
            await ticker.tick()
            await ticker.tick()
            wakeups.append([round(started + sum(ticker.delays[:i]), 6) for i in (1, 2)])
        finally:
            await cache.close()
    assert wakeups[0] == wakeups[1] == [1005.05, 1010.05]


async def test_adapter_errors_are_cached_as_outcomes() -> None:
    """An AdapterError from the source is the key's outcome (and is not retried per request)."""
    cache = ValueCache(refresh_interval=60, idle_timeout=60)
    fetch = CountingFetch()
    fetch.fail_with = NoTargets("none")
    try:
        outcome, _ = await cache.get("k", fetch)
        again, hit = await cache.get("k", fetch)
    finally:
        await cache.close()
    assert isinstance(outcome, NoTargets) and again is outcome and hit
    assert fetch.calls == 1


async def test_unexpected_exceptions_fail_closed() -> None:
    """A bug in a source becomes SourceUnavailable, never a number and never a dead refresher."""
    cache = ValueCache(refresh_interval=60, idle_timeout=60)
    fetch = CountingFetch()
    fetch.fail_with = ZeroDivisionError("boom")
    try:
        outcome, _ = await cache.get("k", fetch)
    finally:
        await cache.close()
    assert isinstance(outcome, SourceUnavailable)
    assert "ZeroDivisionError" in str(outcome)


async def test_idle_keys_are_dropped() -> None:
    """A key nobody asked for within idle_timeout stops refreshing and leaves the cache."""
    now = [0.0]
    ticker = Ticker()
    cache = ValueCache(
        refresh_interval=5, idle_timeout=10, clock=lambda: now[0], wall=ticker, sleep=ticker.sleep
    )
    fetch = CountingFetch()
    try:
        await cache.get("k", fetch)
        await ticker.tick()
        assert (len(cache), fetch.calls) == (1, 2), "a key asked for recently keeps refreshing"
        now[0] = 11.0
        await ticker.tick(sleeps_again=False)
        await until(lambda: len(cache) == 0, what="the idle key to leave")
        assert fetch.calls == 2, "a dropped key is not fetched again"
        assert len(ticker.delays) == 2, "a dropped key's refresher does not sleep again"
    finally:
        await cache.close()


async def test_keys_are_independent() -> None:
    """Different keys have their own fetches."""
    cache = ValueCache(refresh_interval=60, idle_timeout=60)
    a, b = CountingFetch(), CountingFetch()
    try:
        await asyncio.gather(cache.get("a", a), cache.get("b", b), cache.get("a", a))
    finally:
        await cache.close()
    assert (a.calls, b.calls) == (1, 1)


async def test_closing_releases_waiters() -> None:
    """Requests waiting on a first fetch get SourceUnavailable when the cache shuts down."""
    cache = ValueCache(refresh_interval=60, idle_timeout=60)
    waiter = asyncio.create_task(cache.get("k", CountingFetch(delay=10)))
    await until(lambda: len(cache) == 1, what="the first fetch to start")
    await cache.close()
    outcome, _ = await asyncio.wait_for(waiter, 1)
    assert isinstance(outcome, SourceUnavailable)
    with pytest.raises(SourceUnavailable):
        await cache.get("other", CountingFetch())


async def test_new_keys_beyond_max_keys_are_refused() -> None:
    """At max_keys live keys a new key is refused with TooManyKeys (429); existing keys still answer."""
    cache = ValueCache(refresh_interval=60, idle_timeout=60, max_keys=2)
    try:
        await cache.get("a", CountingFetch())
        await cache.get("b", CountingFetch())
        with pytest.raises(TooManyKeys) as caught:
            await cache.get("c", CountingFetch())
        assert caught.value.code == 429
        outcome, hit = await cache.get("a", CountingFetch())
        assert hit
        assert outcome == Sample(1.0, 1001.0)
    finally:
        await cache.close()
