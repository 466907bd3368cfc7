"""The value cache: single flight, background refresh, idle expiry, failures replace values."""

from __future__ import annotations

import asyncio

import pytest

from adapter.cache import ValueCache
from adapter.errors import NoTargets, SourceUnavailable
from adapter.sources import Sample


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
    """After the first fetch, reads are hits and the refresher replaces the value on its interval."""
    cache = ValueCache(refresh_interval=0.05, idle_timeout=60)
    fetch = CountingFetch()
    try:
        first, hit = await cache.get("k", fetch)
        assert (first, hit) == (Sample(1.0, 1001.0), False)
        await asyncio.sleep(0.18)
        later, hit = await cache.get("k", fetch)
    finally:
        await cache.close()
    assert hit is True
    assert isinstance(later, Sample) and later.value is not None and later.value >= 3


async def test_a_failed_refresh_replaces_the_previous_value() -> None:
    """A source that goes down is never hidden behind the value from before it did."""
    cache = ValueCache(refresh_interval=0.02, idle_timeout=60)
    fetch = CountingFetch()
    try:
        await cache.get("k", fetch)
        fetch.fail_with = SourceUnavailable("down")
        await asyncio.sleep(0.08)
        outcome, _ = await cache.get("k", fetch)
    finally:
        await cache.close()
    assert isinstance(outcome, SourceUnavailable)


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
    cache = ValueCache(refresh_interval=0.01, idle_timeout=10, clock=lambda: now[0])
    fetch = CountingFetch()
    try:
        await cache.get("k", fetch)
        assert len(cache) == 1
        now[0] = 11.0
        await asyncio.sleep(0.05)
        assert len(cache) == 0
        calls = fetch.calls
        await asyncio.sleep(0.05)
        assert fetch.calls == calls, "a dropped key is no longer fetched"
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
    await asyncio.sleep(0.01)
    await cache.close()
    outcome, _ = await asyncio.wait_for(waiter, 1)
    assert isinstance(outcome, SourceUnavailable)
    with pytest.raises(SourceUnavailable):
        await cache.get("other", CountingFetch())


async def test_new_keys_beyond_max_keys_are_refused() -> None:
    """At max_keys live keys a new key is refused with TooManyKeys (429); existing keys still answer."""
    from adapter.errors import TooManyKeys

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
