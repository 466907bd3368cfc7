"""The profile's clients: open-loop arrivals that send exactly the offered rate, the same pattern for
the same seed, and closed-loop clients that keep N requests in flight.

The driver's HTTP client is replaced by a recorder (its own tests run it against an emulated vLLM):
here only the schedule matters, on a clock sped up 50 times.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from lab.emulator.runner import ScaledClock
from lab.profile.client import CompletionClient, Outcome
from lab.profile.load import LoadDriver
from lab.profile.workload import Sampler, fixed


class Recorder(CompletionClient):
    """Answers every request after `service` seconds of the clock, recording when each was sent."""

    def __init__(self, clock: ScaledClock, service: float = 0.0) -> None:  # no session: nothing is sent
        self.clock = clock
        self.service = service
        self.sent: list[float] = []
        self.inflight = self.most = 0

    async def complete(
        self, prompt: list[int], max_tokens: int, on_first_token: Callable[[float], None] | None = None
    ) -> Outcome:
        sent = self.clock.now()
        self.sent.append(sent)
        self.inflight += 1
        self.most = max(self.most, self.inflight)
        await asyncio.sleep(self.clock.real(self.service))
        self.inflight -= 1
        return Outcome(sent, 0.0, 0.0, self.service, self.clock.now(), max_tokens)


def _driver(service: float = 0.0, seed: str = "s") -> tuple[LoadDriver, Recorder]:
    clock = ScaledClock(50.0)
    recorder = Recorder(clock, service)
    driver = LoadDriver(recorder, Sampler(fixed(4, 2)), clock)
    driver.reseed(seed)
    return driver, recorder


async def test_open_loop_sends_exactly_the_offered_rate_within_the_step() -> None:
    driver, recorder = _driver()
    start = driver.clock.now()
    await driver.open_loop(20.0, start + 5.0)
    await asyncio.gather(*driver.pending)
    assert len(recorder.sent) == 100
    assert all(start <= t <= start + 5.2 for t in recorder.sent)
    assert len(driver.outcomes) == 100 and driver.inflight == 0


async def test_the_same_seed_sends_the_same_pattern() -> None:
    """Arrivals relative to the step's start are the same for the same seed, and differ for another."""
    runs = []
    for seed in ("a", "a", "b"):
        driver, recorder = _driver(seed=seed)
        start = driver.clock.now()
        await driver.open_loop(10.0, start + 2.0)
        await asyncio.gather(*driver.pending)
        runs.append([t - start for t in recorder.sent])
    assert len(runs[0]) == len(runs[1]) == len(runs[2]) == 20

    def apart(a: list[float], b: list[float]) -> float:
        return max(abs(x - y) for x, y in zip(a, b, strict=True))

    # A millisecond of the loop's jitter is 0.05 s on this clock; another pattern is a whole gap away.
    assert apart(runs[0], runs[1]) < 0.15 < apart(runs[0], runs[2])


async def test_closed_loop_keeps_its_clients_busy_and_lets_the_last_requests_finish() -> None:
    """Four clients, each sending again when answered: never more than four in flight; stopping the
    clients at the end does not abort the requests they were waiting for."""
    driver, recorder = _driver(service=0.5)
    await driver.closed_loop(4, driver.clock.now() + 3.0)
    assert recorder.most == 4 and driver.inflight == 4
    await asyncio.gather(*driver.pending)
    assert len(driver.outcomes) == len(recorder.sent) >= 4 * 6
