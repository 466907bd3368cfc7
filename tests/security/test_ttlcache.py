"""`adapter.security.ttlcache`: expiry, eviction and single-flight loading."""

from __future__ import annotations

import asyncio

import pytest

from adapter.security.ttlcache import TTLCache
from tests.fakes import HandClock
from tests.waiting import until


def test_entry_lives_exactly_its_ttl() -> None:
    """An entry is returned before its TTL has passed and gone once it has."""
    clock = HandClock()
    cache: TTLCache[str, int] = TTLCache(monotonic=clock)
    cache.put("k", 1, ttl=10)
    clock.now += 9.999
    assert cache.get("k") == (True, 1)
    clock.now += 0.001
    assert cache.get("k") == (False, None)
    assert len(cache) == 0


def test_none_is_a_cacheable_value() -> None:
    """A cached `None` (e.g. "token not authenticated") is a hit, not a miss."""
    cache: TTLCache[str, None] = TTLCache()
    cache.put("k", None, ttl=10)
    assert cache.get("k") == (True, None)


@pytest.mark.parametrize("ttl", [pytest.param(0, id="zero"), pytest.param(-1, id="negative")])
def test_non_positive_ttl_stores_nothing(ttl: float) -> None:
    """A TTL of zero or less means "do not cache", and drops an older entry for the key."""
    cache: TTLCache[str, int] = TTLCache()
    cache.put("k", 1, ttl=10)
    cache.put("k", 2, ttl=ttl)
    assert cache.get("k") == (False, None)


def test_oldest_entries_are_evicted_beyond_the_limit() -> None:
    """The cache never holds more than `max_entries`; the least recently stored goes first."""
    cache: TTLCache[int, int] = TTLCache(max_entries=2)
    for key in range(3):
        cache.put(key, key, ttl=10)
    assert len(cache) == 2
    assert cache.get(0) == (False, None)
    assert cache.get(2) == (True, 2)


def test_max_entries_must_be_positive() -> None:
    """A cache that can hold nothing is a configuration mistake."""
    with pytest.raises(ValueError, match="max_entries 0 must be at least 1"):
        TTLCache(max_entries=0)


async def test_concurrent_loads_of_one_key_run_once() -> None:
    """Callers asking for the same key while it loads share one load and its result."""
    cache: TTLCache[str, int] = TTLCache()
    calls = 0
    release = asyncio.Event()

    async def load() -> int:
        nonlocal calls
        calls += 1
        await release.wait()
        return 7

    waiters = [asyncio.create_task(cache.get_or_load("k", load, lambda _: 10)) for _ in range(5)]
    # The load task is created by the first waiter, after all five were scheduled: once it runs,
    # every waiter has asked for the key.
    await until(lambda: calls == 1, what="the shared load to start")
    release.set()
    assert await asyncio.gather(*waiters) == [7] * 5
    assert calls == 1


async def test_failed_load_is_seen_by_every_waiter_and_not_cached() -> None:
    """An exception reaches all callers of that load; the next call loads again."""
    cache: TTLCache[str, int] = TTLCache()
    attempts = 0

    async def load() -> int:
        nonlocal attempts
        attempts += 1
        await asyncio.sleep(0)
        if attempts == 1:
            raise RuntimeError("unreachable")
        return 1

    results = await asyncio.gather(
        *(cache.get_or_load("k", load, lambda _: 10) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, RuntimeError) for r in results)
    assert await cache.get_or_load("k", load, lambda _: 10) == 1
    assert attempts == 2


async def test_a_cancelled_caller_does_not_cancel_the_load_for_others() -> None:
    """A caller that goes away (client disconnect) leaves the shared load running for the rest."""
    cache: TTLCache[str, int] = TTLCache()
    release = asyncio.Event()

    started = asyncio.Event()

    async def load() -> int:
        started.set()
        await release.wait()
        return 3

    first = asyncio.create_task(cache.get_or_load("k", load, lambda _: 10))
    second = asyncio.create_task(cache.get_or_load("k", load, lambda _: 10))
    await asyncio.wait_for(started.wait(), 5.0)  # both callers wait on the load that now runs
    first.cancel()
    release.set()
    assert await second == 3
    assert cache.get("k") == (True, 3)


async def test_ttl_depends_on_the_value() -> None:
    """`ttl(result)` decides per value, so allowed and denied answers can live differently long."""
    clock = HandClock()
    cache: TTLCache[str, bool] = TTLCache(monotonic=clock)

    async def allowed() -> bool:
        return True

    async def denied() -> bool:
        return False

    def ttl(value: bool) -> float:
        return 30 if value else 5

    await cache.get_or_load("allow", allowed, ttl)
    await cache.get_or_load("deny", denied, ttl)
    clock.now += 5
    assert cache.get("deny") == (False, None)
    assert cache.get("allow") == (True, True)
