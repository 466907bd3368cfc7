"""A smoothed gauge through the scrape source (adapter/sources/scrape.py with adapter/sources/smoothing.py):
real HTTP pods on loopback whose gauges the test changes between rounds."""

from __future__ import annotations

import dataclasses

import pytest

from adapter.errors import SourceUnavailable
from adapter.sources import Sample
from adapter.sources.scrape import ScrapeSource
from adapter.vocabulary.catalogue import GaugeSpec, MetricDef
from tests.sources.scrape_fleet import EVERYTHING, Fleet, MakeSource, metric, rounds
from tests.vllm_pages import PodLoad
from tests.waiting import eventually

INFLIGHT = metric("vllm_requests_inflight")


def smoothed(base: MetricDef, seconds: float) -> MetricDef:
    assert isinstance(base.spec, GaugeSpec)
    return base.with_overrides(spec=dataclasses.replace(base.spec, smoothing_seconds=seconds))


async def _after_change(source: ScrapeSource, which: MetricDef) -> Sample:
    """The value from a round that started after the test's last change (two rounds later)."""
    await rounds(source, 2)
    return await source.fetch(which, "ml", EVERYTHING)


async def test_the_mean_of_the_rounds_fetched_and_the_raw_value_beside_it(
    fleet: Fleet, make_source: MakeSource
) -> None:
    """10, then 20, then 60 in flight: the smoothed metric serves 10, 15, 30 (a window not yet full
    serves the mean of what it has), dated by the latest round; the same gauge unsmoothed, from the
    same scrapes, serves the latest value."""
    url = fleet.add("a", PodLoad("llama", running=10))
    source = await make_source([url])
    slow = smoothed(INFLIGHT, 60.0)
    first = await source.fetch(slow, "ml", EVERYTHING)
    assert first.value == 10.0
    fleet.pods["a"].load = PodLoad("llama", running=15, waiting=5)
    second = await _after_change(source, slow)
    assert second.value == 15.0
    assert second.timestamp > first.timestamp
    fleet.pods["a"].load = PodLoad("llama", running=60)
    third = await _after_change(source, slow)
    raw = await source.fetch(INFLIGHT, "ml", EVERYTHING)
    assert (third.value, third.targets) == (30.0, 1)
    assert raw.value == 60.0
    assert "smooths:  the mean of that value over the rounds of the last 60s" in source.describe(
        slow, "ml", EVERYTHING
    )


async def test_a_failed_scrape_is_an_error_and_never_a_zero_in_the_mean(
    fleet: Fleet, make_source: MakeSource
) -> None:
    url = fleet.add("a", PodLoad("llama", running=12))
    source = await make_source([url])
    slow = smoothed(INFLIGHT, 60.0)
    assert (await source.fetch(slow, "ml", EVERYTHING)).value == 12.0
    fleet.pods["a"].behaviour = "http-500"
    with pytest.raises(SourceUnavailable, match="HTTP 500"):
        await _after_change(source, slow)
    fleet.pods["a"].behaviour = "ok"
    fleet.pods["a"].load = PodLoad("llama", running=6)
    after = await _after_change(source, slow)
    assert after.value == 9.0, "the mean of 12 and 6; a zero for the failed round would give 6"


async def test_old_rounds_leave_a_short_window(fleet: Fleet, make_source: MakeSource) -> None:
    """A 1.5 s window (three rounds of 0.5 s): after the load drops from 100 to 0 the served mean
    falls, never rises and never leaves [0, 100], and reaches 0 once the 100s are a window old."""
    url = fleet.add("a", PodLoad("llama", running=100))
    source = await make_source([url])
    quick = smoothed(INFLIGHT, 1.5)
    assert (await source.fetch(quick, "ml", EVERYTHING)).value == 100.0
    fleet.pods["a"].load = PodLoad("llama", running=0)
    seen: list[float] = []

    async def drained() -> bool:
        value = (await source.fetch(quick, "ml", EVERYTHING)).value
        assert value is not None
        seen.append(value)
        return value == 0.0

    await eventually(drained, 15.0, "the mean to reach 0", interval=0.1)
    assert all(0.0 <= v <= 100.0 for v in seen)
    assert seen == sorted(seen, reverse=True), seen
