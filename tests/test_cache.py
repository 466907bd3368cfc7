"""The value cache: single flight, background refresh on wall-clock ticks, idle expiry, failures
replace values. Background refreshes are stepped with an injected sleep (`tests.fakes.Ticker`), so
no test waits in real time for the cache to do something."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Hashable, Mapping, Sequence

import pytest

from adapter.cache import Outcome, ValueCache, until_next_tick
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
        refresh_interval=5, idle_timeout=10, monotonic=lambda: now[0], wall=ticker, sleep=ticker.sleep
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


class Keyed:
    """A fetch that answers what a table says for its key (a `NoTargets` for an empty namespace)."""

    def __init__(self, outcome: Sample | Exception) -> None:
        self.outcome = outcome

    async def __call__(self) -> Sample:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


def tenant_cache(max_keys: int, now: list[float]) -> ValueCache:
    """A cache whose keys are (namespace, name) pairs charged to their namespace."""
    cache = ValueCache(refresh_interval=60, idle_timeout=600, max_keys=max_keys, monotonic=lambda: now[0])
    cache.attach(tenant=lambda key: key[0] if isinstance(key, tuple) else None)
    return cache


SERVED = Sample(1.0, 1000.0, 1)


async def test_a_flood_of_empty_namespaces_cannot_keep_out_a_key_with_targets() -> None:
    """Keys answering "no targets" go first: after a flood of them fills max_keys, a new key in a
    namespace with targets is served, and the earlier served keys all stay."""
    now = [0.0]
    cache = tenant_cache(10, now)
    try:
        for i in range(3):
            await cache.get(("prod", f"m{i}"), Keyed(SERVED))
        for i in range(20):  # 20 empty namespaces for 7 free places
            now[0] += 1
            await cache.get((f"empty-{i}", "m"), Keyed(NoTargets("none")))
        outcome, _ = await cache.get(("team-b", "m"), Keyed(SERVED))
        assert outcome == SERVED
        live = {key for key, _ in cache.outcomes()}
        assert {("prod", "m0"), ("prod", "m1"), ("prod", "m2"), ("team-b", "m")} <= live
        assert len(cache) == 10
        assert ("empty-0", "m") not in live, "the least recently read empty key went first"
    finally:
        await cache.close()


async def test_one_namespace_cannot_hold_more_than_its_share() -> None:
    """With max_keys full of one namespace's served keys, a second namespace gets a place (its share
    is half) and the first loses its least recently read key; a namespace at its share gets 429."""
    now = [0.0]
    cache = tenant_cache(4, now)
    try:
        for i in range(4):
            now[0] += 1
            await cache.get(("greedy", f"m{i}"), Keyed(SERVED))
        with pytest.raises(TooManyKeys):
            await cache.get(("greedy", "m4"), Keyed(SERVED))
        for i in range(2):
            now[0] += 1
            assert (await cache.get(("fair", f"m{i}"), Keyed(SERVED)))[0] == SERVED
        live = {key for key, _ in cache.outcomes()}
        assert live == {("greedy", "m2"), ("greedy", "m3"), ("fair", "m0"), ("fair", "m1")}
        with pytest.raises(TooManyKeys, match="holds its share"):
            await cache.get(("fair", "m2"), Keyed(SERVED))
    finally:
        await cache.close()


async def test_a_tick_refreshes_every_key_through_refresh_many() -> None:
    """With `refresh_many` attached, each tick asks for every live key in one call (so a source can
    group them), and each key gets its own outcome; a key the answer lacks fails closed."""
    ticker = Ticker()
    cache = ValueCache(refresh_interval=5, idle_timeout=60, wall=ticker, sleep=ticker.sleep)
    calls: list[list[str]] = []

    async def refresh_many(keys: Sequence[Hashable]) -> Mapping[Hashable, Outcome]:
        calls.append(sorted(map(str, keys)))
        return {key: Sample(float(len(calls)), 2000.0) for key in keys if key != "c"}

    cache.attach(refresh_many=refresh_many)
    try:
        for key in "abc":
            await cache.get(key, CountingFetch())
        await ticker.tick()
        outcomes = {key: (await cache.get(key, CountingFetch()))[0] for key in "abc"}
    finally:
        await cache.close()
    assert calls == [["a", "b", "c"]]
    assert outcomes["a"] == outcomes["b"] == Sample(1.0, 2000.0)
    assert isinstance(outcomes["c"], SourceUnavailable)


async def test_a_failing_refresh_many_fails_every_key_closed() -> None:
    """A bug in the grouped refresh is an error for every key, never a kept value nor a dead loop."""
    ticker = Ticker()
    cache = ValueCache(refresh_interval=5, idle_timeout=60, wall=ticker, sleep=ticker.sleep)

    async def broken(keys: Sequence[Hashable]) -> Mapping[Hashable, Outcome]:
        raise ZeroDivisionError("boom")

    cache.attach(refresh_many=broken)
    try:
        await cache.get("a", CountingFetch())
        await ticker.tick()
        outcome, _ = await cache.get("a", CountingFetch())
        await ticker.tick()  # the refresher is still alive: it went back to sleep
    finally:
        await cache.close()
    assert isinstance(outcome, SourceUnavailable) and "ZeroDivisionError" in str(outcome)


async def test_settling_a_refresh_of_many_keys_lets_other_work_run_between_parts() -> None:
    """The outcomes of a thousand keys are settled a part at a time: a request arriving meanwhile
    waits for one part, not for the whole fleet's keys. Every key still gets its outcome."""
    ticker = Ticker()
    settled = 0

    def count(outcome: Outcome) -> None:
        nonlocal settled
        settled += 1

    cache = ValueCache(
        refresh_interval=5, idle_timeout=60, max_keys=2000, wall=ticker, sleep=ticker.sleep, on_outcome=count
    )

    async def refresh_many(keys: Sequence[Hashable]) -> Mapping[Hashable, Outcome]:
        return {key: Sample(2.0, 2000.0) for key in keys}

    cache.attach(refresh_many=refresh_many)
    seen_midway: list[int] = []
    refreshing = True

    async def other_work() -> None:
        while refreshing:
            if 0 < settled < 1000:
                seen_midway.append(settled)
            await asyncio.sleep(0)

    try:
        for key in range(1000):
            await cache.get(key, CountingFetch())
        await ticker.sleeping()
        settled = 0
        other = asyncio.create_task(other_work())
        await ticker.tick()
        refreshing = False
        await other
        outcomes = {(await cache.get(key, CountingFetch()))[0] for key in range(1000)}
    finally:
        await cache.close()
    assert settled == 1000
    assert outcomes == {Sample(2.0, 2000.0)}
    assert seen_midway, "nothing else ran while the refresh settled its keys"


async def test_a_settled_key_holds_no_event() -> None:
    """A key keeps an `asyncio.Event` only while requests may wait for its first fetch: a fleet of
    settled keys holds none (each is about 0.7 KiB with its queue of waiters)."""

    def events() -> int:
        return sum(isinstance(obj, asyncio.Event) for obj in gc.get_objects())

    cache = ValueCache(refresh_interval=60, idle_timeout=60)
    before = events()
    try:
        await asyncio.gather(*(cache.get(f"k{n}", CountingFetch()) for n in range(100)))
        assert len(cache) == 100
        held = events() - before
    finally:
        await cache.close()
    assert held <= 1  # the refresher's own, if any; not one per key
