"""One healthy engine, measured a step at a time with the profile's own pieces.

The load (`lab.load.LoadDriver`: open-loop Poisson arrivals or closed-loop clients), the
client (`CompletionClient`), the `/metrics` reader and the step's summary and verdict
(`lab.profile.steps.summarize`) are the profile's: a step here is judged exactly as a profile step
is. What differs is the search around the steps: an experiment asks several questions of several
engines in minutes, so each step has a fixed length (`Measure.step`) instead of the profile's
window rule, and an undecided window ends with the point estimates (`marginal`).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Final, Literal

import aiohttp

from lab.clock import ScaledClock
from lab.experiments.search import significant
from lab.load.client import CompletionClient, RequestResult
from lab.load.driver import LoadDriver
from lab.load.metrics_reader import MetricsReader
from lab.load.server import ProfileFailure, identify
from lab.load.workload import Sampler, Workload
from lab.profile.schema import PercentileSlo, Step
from lab.profile.steps import Window, summarize
from lab.virtual_time import loop_time

_WARMUP_REQUESTS: Final = 4
# A step in which more than this share of requests failed is a broken engine, not a slow one.
_FAILED_SHARE: Final = 0.5
# The idle wait between steps gives up after this many real seconds: a stuck request is the next
# step's noise, not a reason to stop the experiment.
_IDLE_WITHIN: Final = 30.0


@dataclass(frozen=True)
class Measured:
    """One step, and the requests sent in its window that met the SLO (each its TTFT and TPOT)."""

    step: Step
    good: int
    """Requests sent in the measured window that finished within both objectives."""
    span: float
    """Server seconds over which those requests were sent: `good / span` met the SLO per second."""

    def cost(self, gpus: int) -> float | None:
        """GPU-seconds per request that met the SLO (`None` when none did)."""
        return gpus * self.span / self.good if self.good else None


class EngineProbe:
    """Steps of load against one engine at `url`, on its clock (`time_scale`)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        url: str,
        model: str,
        slo: PercentileSlo,
        time_scale: float,
        settle: float,
        window: float,
    ) -> None:
        self.session = session
        self.url = url
        self.model = model
        self.slo = slo
        self.clock = ScaledClock(time_scale, monotonic=loop_time)  # virtual on a `VirtualTimeLoop`
        self.settle = settle * time_scale
        """Server seconds of unmeasured load before each window."""
        self.window = window * time_scale
        self._driver: LoadDriver | None = None
        self._reader: MetricsReader | None = None

    @property
    def driver(self) -> LoadDriver:
        assert self._driver is not None, "start() first"
        return self._driver

    async def start(self, workload: Workload) -> None:
        """Identify the engine (vLLM, serving the model) and warm it up; `ProfileFailure` if it is not."""
        identity = await identify(self.session, self.url, self.model)
        client = CompletionClient(self.session, self.url, self.model, self.clock)
        self._driver = LoadDriver(client, Sampler(workload), self.clock)
        self._reader = MetricsReader(
            self.session, self.url, identity.metrics_model, self.clock, lambda: self.driver.inflight
        )
        self._reader.start()
        outcomes = await asyncio.gather(*(self.driver.launch() for _ in range(_WARMUP_REQUESTS)))
        if all(o.error for o in outcomes):
            raise ProfileFailure(f"every warm-up request failed: {outcomes[0].error}")

    async def close(self) -> None:
        if self._driver is not None:
            await self._driver.cancel()
        if self._reader is not None:
            await self._reader.stop()

    async def idle(self) -> None:
        """Abort what is in flight and wait until the engine runs and queues nothing."""
        await self.driver.cancel()
        assert self._reader is not None
        deadline = asyncio.get_running_loop().time() + _IDLE_WITHIN
        while asyncio.get_running_loop().time() < deadline:
            with contextlib.suppress(Exception):  # a failed read is retried until the deadline
                snapshot = await self._reader.fetch()
                if snapshot.running + snapshot.waiting == 0:
                    return
            await asyncio.sleep(0.1)

    async def step(
        self,
        kind: Literal["rate", "concurrency"],
        offered: float,
        workload: Workload,
        seed: str,
        saturated: float | None = None,
    ) -> Measured:
        """One step from idle: `offered` requests per second (open loop) or clients (closed loop)
        of `workload` for the settle time and the window, drawn from `seed`; its summary."""
        await self.idle()
        driver, reader = self.driver, self._reader
        assert reader is not None
        driver.sampler = Sampler(workload, seed)
        driver.reseed(seed)
        start = self.clock.now()
        settled, end = start + self.settle, start + self.settle + self.window
        # About forty snapshots a window, as the profile reads them, at most ~10 a real second.
        reader.interval = min(0.5, max(0.1, self.clock.real(self.window) / 40))
        if kind == "rate":
            await driver.open_loop(offered, end)
        else:
            await driver.closed_loop(round(offered), end)
        with contextlib.suppress(Exception):
            reader.snapshots.append(await reader.fetch())
        if reader.error:
            raise ProfileFailure(reader.error)
        # A request's lifetime is not known here: latencies count for requests sent up to an eighth
        # of the window before its end, so nearly all of them have finished at the summary.
        window = Window.measured(kind, offered, start, settled, end, self.window / 4)
        pending = [(p.sent, p.ttft) for p in driver.pending.values()]
        step = summarize(
            window,
            driver.outcomes,
            pending,
            reader.between(settled, end + 1e-9),
            self.slo,
            saturated_rate=saturated,
            final=True,
        )
        if step.requests and step.errors > _FAILED_SHARE * step.requests:
            first = next((o.error for o in reversed(driver.outcomes) if o.error), "unknown")
            raise ProfileFailure(
                f"{step.errors} of {step.requests} requests failed "
                f"at {significant(offered)} ({kind}): {first}"
            )
        return Measured(step, _good(driver.outcomes, window, self.slo), window.latency_end - window.settled)


def _good(outcomes: list[RequestResult], window: Window, slo: PercentileSlo) -> int:
    """Requests sent in the window that finished within both objectives."""
    return sum(
        1
        for o in outcomes
        if window.settled <= o.sent <= window.latency_end
        and o.error is None
        and o.ttft is not None
        and o.ttft <= slo.ttft_seconds
        and (o.tpot is None or o.tpot <= slo.tpot_seconds)
    )
