"""The profile's clients: open-loop Poisson arrivals at a rate, or a fixed number of closed-loop clients.

Every request is a task; its `RequestResult` lands in `outcomes` when it ends. While it runs, `pending`
knows when it was sent and, once streaming, its TTFT, so a step can be summarized at its end
without waiting for stragglers. Open-loop arrivals keep their schedule whatever the server does
(a slow server does not slow the clients down, as real traffic does not).

Each step draws its arrival gaps and request lengths from its own seed (`reseed`), so two profiles
with the same seed send the same traffic pattern in each step, scaled to its rate: comparing two
servers (a twin and its original, a configuration before and after) then compares the servers,
not two draws of the traffic.
"""

from __future__ import annotations

import asyncio
import random
import statistics
from dataclasses import dataclass
from typing import Final

from lab.clock import ScaledClock
from lab.load.client import CompletionClient, RequestResult
from lab.load.server import ProfileFailure
from lab.load.workload import Sampler

#: the warm-up's requests, sent two at a time (caches, compiled graphs)
WARMUP_REQUESTS: Final = 8


@dataclass
class Pending:
    """A request still running: when it was sent, and its TTFT once the first token came."""

    sent: float
    ttft: float | None = None


class LoadDriver:
    """Sends the workload's requests through `client`, on the profile's clock."""

    def __init__(self, client: CompletionClient, sampler: Sampler, clock: ScaledClock, seed: int = 0) -> None:
        self.client = client
        self.sampler = sampler
        self.clock = clock
        self.outcomes: list[RequestResult] = []
        self.pending: dict[asyncio.Task[RequestResult], Pending] = {}
        self._rng = random.Random(seed)

    def reseed(self, seed: int | str) -> None:
        """Draw arrival gaps and request lengths from `seed` on."""
        self._rng.seed(seed)
        self.sampler.reseed(seed)

    @property
    def inflight(self) -> int:
        """Requests sent and not finished."""
        return len(self.pending)

    def launch(
        self, prompt: list[int] | None = None, max_tokens: int | None = None
    ) -> asyncio.Task[RequestResult]:
        """Send one request now (a workload draw unless given); its outcome is recorded when it ends."""
        if prompt is None or max_tokens is None:
            prompt, max_tokens = self.sampler.draw()
        record = Pending(self.clock.now())

        def first_token(ttft: float) -> None:
            record.ttft = ttft

        task = asyncio.create_task(self.client.complete(prompt, max_tokens, first_token))
        self.pending[task] = record
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[RequestResult]) -> None:
        self.pending.pop(task, None)
        if not task.cancelled() and task.exception() is None:
            self.outcomes.append(task.result())

    async def sleep_until(self, at: float) -> None:
        """Sleep until the profile's clock reads `at`."""
        delay = self.clock.real(at - self.clock.now())
        if delay > 0:
            await asyncio.sleep(delay)

    async def open_loop(self, rate: float, until: float) -> None:
        """Poisson arrivals at `rate` per second until the clock reads `until`; returns without waiting
        for the requests (they run on into the next step, as traffic does).

        The step sends exactly `rate` times its length in requests, at times drawn uniformly over
        it: a Poisson process given its count, as bursty as any, but one whose realized rate is the
        offered rate. Drawn freely, a step's count strays by its square root (±5 % at 400
        requests), and a step seeded the same in every profile would stray the same way each time.
        """
        start = self.clock.now()
        count = round(rate * max(0.0, until - start))
        for at in sorted(start + self._rng.random() * (until - start) for _ in range(count)):
            await self.sleep_until(at)
            self.launch()
        await self.sleep_until(until)

    async def closed_loop(self, clients: int, until: float) -> None:
        """`clients` clients, each sending its next request when the last ends, until `until`."""

        async def client() -> None:
            while self.clock.now() < until:
                # Shielded: stopping the loop at `until` must not abort the request it waits for.
                await asyncio.shield(self.launch())

        workers = [asyncio.create_task(client()) for _ in range(clients)]
        try:
            await self.sleep_until(until)
        finally:
            # A worker's last request runs on; only the loop that would send another stops.
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def one(self, prompt: list[int], max_tokens: int) -> RequestResult:
        """One request, waited for."""
        return await self.launch(prompt, max_tokens)

    async def cancel(self) -> None:
        """Abort every running request (its connection closes, and vLLM aborts it)."""
        tasks = list(self.pending)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def answered(outcomes: list[RequestResult], what: str) -> list[RequestResult]:
    """The outcomes without an error; `ProfileFailure` naming the first error when none is left."""
    ok = [o for o in outcomes if o.error is None]
    if not ok:
        first = next((o.error for o in outcomes if o.error), "no request was sent")
        raise ProfileFailure(f"every {what} request failed: {first}")
    return ok


async def warm_up(driver: LoadDriver) -> float:
    """`WARMUP_REQUESTS` workload draws, two at a time (caches, compiled graphs); the unloaded
    request lifetime (their median); `ProfileFailure` if every one failed."""
    outcomes: list[RequestResult] = []
    for _ in range(WARMUP_REQUESTS // 2):
        outcomes += await asyncio.gather(*(driver.one(*driver.sampler.draw()) for _ in range(2)))
    return statistics.median(o.e2e for o in answered(outcomes, "warm-up") if o.e2e is not None)
