"""When a fetch of the scrape source waits for a round (adapter/sources/scrape.py, scrape_loop.py).

A fetch finding the newest round settled more than 10 % of the interval ago waits for the next one,
so the value cache (refreshing once per interval on its own clock) serves fresh samples; and a
round settles as soon as the pods that answered last time have answered, so a pod that keeps
timing out does not age the others' samples by its timeout.

Both clocks of the source are injected and moved by hand: the wall clock (rounds start on its ticks
and are dated by it) and the monotonic one (how long ago the newest round settled). While the wall
clock stands between two ticks no round starts, so each test decides which round a fetch sees,
without sleeping. The pods are real HTTP servers on loopback (tests/sources/scrape_fleet.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import pytest

from adapter.config import ScrapeSettings
from adapter.sources.discovery import StaticDiscovery
from adapter.sources.scrape import ScrapeSource
from adapter.vocabulary import catalogue
from tests.fakes import HandClock
from tests.sources.scrape_fleet import EVERYTHING, TIMEOUT, Fleet, rounds
from tests.vllm_pages import PodLoad

INTERVAL = 0.5
T0 = 1_800_000_000.0  # a tick: a multiple of the interval
ON_TIME = 0.05 * INTERVAL  # within the 10 % of the interval in which a fetch serves the round at hand
LATE = 0.3 * INTERVAL  # past it: the fetch waits for the next round
WAITING = catalogue.builtin("vllm_requests_waiting")


@dataclass
class Clocks:
    """The source's wall clock (at `T0`) and monotonic clock, moved only by the test."""

    wall: HandClock
    monotonic: HandClock

    def next_tick(self, late: float) -> float:
        """Move the wall clock to the next tick, and the monotonic one `late` past the newest
        settled round; returns the tick."""
        self.wall.now += INTERVAL
        self.monotonic.now += late
        return self.wall.now


OnPartial = Literal["error", "ignore-failed"]
MakeClocked = Callable[..., Awaitable[ScrapeSource]]


@pytest.fixture
def clocks() -> Clocks:
    wall = HandClock()
    wall.now = T0
    return Clocks(wall, HandClock())


@pytest.fixture
async def clocked(clocks: Clocks) -> AsyncIterator[MakeClocked]:
    """Start scrape sources of static targets on the hand-moved clocks; close them all after."""
    sources: list[ScrapeSource] = []

    async def make(targets: list[str], *, on_partial: OnPartial = "error") -> ScrapeSource:
        settings = ScrapeSettings(
            targets=tuple(targets), namespace="ml", interval=INTERVAL, timeout=TIMEOUT, on_partial=on_partial
        )
        source = ScrapeSource(
            settings, discovery=StaticDiscovery(targets, "ml"), wall=clocks.wall, monotonic=clocks.monotonic
        )
        sources.append(source)
        await source.start()
        return source

    yield make
    for source in sources:
        await source.close()


async def test_a_fetch_late_in_the_interval_waits_for_the_next_round(
    fleet: Fleet, clocked: MakeClocked, clocks: Clocks
) -> None:
    """A fetch finding the newest round older than 10 % of the interval waits for the next one, so
    the value cache (refreshing once per interval on its own clock) serves fresh samples; a fetch
    within that 10 % serves the round at hand."""
    source = await clocked([fleet.add("a", PodLoad("llama", waiting=1))])
    first = await source.fetch(WAITING, "ml", EVERYTHING)
    done = source.rounds
    assert first.timestamp == T0

    clocks.monotonic.now += ON_TIME
    assert (await source.fetch(WAITING, "ml", EVERYTHING)).timestamp == first.timestamp
    assert source.rounds == done

    tick = clocks.next_tick(late=LATE)
    second = await source.fetch(WAITING, "ml", EVERYTHING)
    assert second.timestamp == tick > first.timestamp  # the next round, dated at its tick
    await rounds(source, 1)  # it finishes; the wall clock stays on its tick, so no other round starts
    assert source.rounds == done + 1


async def test_a_pod_that_keeps_timing_out_does_not_age_the_others(
    fleet: Fleet, clocked: MakeClocked, clocks: Clocks
) -> None:
    """Once a slow pod has failed, fetches stop waiting for it: a round settles when the pods that
    answered last time have answered, so the healthy pods' samples are served without the slow
    pod's 0.4 s timeout added to their age, round after round."""
    slow = fleet.add("slow", PodLoad("llama", waiting=9))
    fleet.pods["slow"].delay = 5.0
    source = await clocked([fleet.add("a", PodLoad("llama", waiting=1)), slow], on_partial="ignore-failed")
    first = await source.fetch(WAITING, "ml", EVERYTHING)  # the first round waits for the timeout
    assert (first.value, first.targets) == (1.0, 1)
    for _ in range(3):
        finished = source.rounds
        tick = clocks.next_tick(late=LATE)
        sample = await source.fetch(WAITING, "ml", EVERYTHING)
        assert (sample.value, sample.timestamp) == (1.0, tick)
        # Served while the round still waits for the slow pod, which then times out again.
        assert source.rounds == finished
        await rounds(source, 1)
