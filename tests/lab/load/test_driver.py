"""The profile's clients: open-loop arrivals that send exactly the offered rate, the same pattern for
the same seed, and closed-loop clients that keep N requests in flight.

The driver's HTTP client is replaced by a recorder (its own tests run it against an emulated vLLM):
here only the schedule matters, on a clock sped up 50 times over the event loop's time. The loop is
a virtual-time one (`lab.virtual_time`): on the wall clock a busy CI machine delayed arrivals past
the step's end, and a millisecond of jitter moved an arrival by 0.05 s of this clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from lab import virtual_time
from lab.clock import ScaledClock
from lab.load.client import CompletionClient, RequestResult
from lab.load.driver import LoadDriver
from lab.load.workload import Sampler, fixed
from lab.virtual_time import loop_time


class Recorder(CompletionClient):
    """Answers every request after `service` seconds of the clock, recording when each was sent."""

    def __init__(self, clock: ScaledClock, service: float = 0.0) -> None:  # no session: nothing is sent
        self.clock = clock
        self.service = service
        self.sent: list[float] = []
        self.inflight = self.most = 0

    async def complete(
        self, prompt: list[int], max_tokens: int, on_first_token: Callable[[float], None] | None = None
    ) -> RequestResult:
        sent = self.clock.now()
        self.sent.append(sent)
        self.inflight += 1
        self.most = max(self.most, self.inflight)
        await asyncio.sleep(self.clock.real(self.service))
        self.inflight -= 1
        return RequestResult(sent, 0.0, 0.0, self.service, self.clock.now(), max_tokens)


def _driver(service: float = 0.0, seed: str = "s") -> tuple[LoadDriver, Recorder]:
    clock = ScaledClock(50.0, monotonic=loop_time)
    recorder = Recorder(clock, service)
    driver = LoadDriver(recorder, Sampler(fixed(4, 2)), clock)
    driver.reseed(seed)
    return driver, recorder


def test_open_loop_sends_exactly_the_offered_rate_within_the_step() -> None:
    async def main() -> tuple[float, list[float], LoadDriver]:
        driver, recorder = _driver()
        start = driver.clock.now()
        await driver.open_loop(20.0, start + 5.0)
        await asyncio.gather(*driver.pending)
        return start, recorder.sent, driver

    start, sent, driver = virtual_time.run(main())
    assert len(sent) == 100
    assert all(start <= t < start + 5.0 for t in sent)
    assert len(driver.outcomes) == 100 and driver.inflight == 0


def test_the_same_seed_sends_the_same_pattern() -> None:
    """Arrivals relative to the step's start are the same for the same seed, and differ for another."""

    async def main(seed: str) -> list[float]:
        driver, recorder = _driver(seed=seed)
        start = driver.clock.now()
        await driver.open_loop(10.0, start + 2.0)
        await asyncio.gather(*driver.pending)
        return [t - start for t in recorder.sent]

    runs = [virtual_time.run(main(seed)) for seed in ("a", "a", "b")]
    assert len(runs[0]) == len(runs[1]) == len(runs[2]) == 20
    assert runs[0] == pytest.approx(runs[1], abs=1e-9)
    assert max(abs(x - y) for x, y in zip(runs[0], runs[2], strict=True)) > 0.15


def test_closed_loop_keeps_its_clients_busy_and_lets_the_last_requests_finish() -> None:
    """Four clients, each sending again when answered: never more than four in flight; stopping the
    clients at the end does not abort the requests they were waiting for."""

    async def main() -> tuple[int, int, int, int]:
        driver, recorder = _driver(service=0.7)  # the fifth requests (sent at 2.8) straddle the stop at 3
        await driver.closed_loop(4, driver.clock.now() + 3.0)
        most, inflight = recorder.most, driver.inflight
        await asyncio.gather(*driver.pending)
        return most, inflight, len(driver.outcomes), len(recorder.sent)

    most, inflight, outcomes, sent = virtual_time.run(main())
    assert most == 4 and inflight == 4
    assert outcomes == sent == 4 * 5
