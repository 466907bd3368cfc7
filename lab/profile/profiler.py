"""One profiling run, start to end: identify the server, warm it up, sweep, probe, search the knee.

```
identify (reachable, vLLM, serves the model) ─► warm-up
  ─► concurrency sweep (`sweep`): 1, 2, 4 … closed-loop clients until a queue stands (TPOT vs
     batch, the saturated throughput; one client alone checks that the SLO can be met at all)
  ─► prefill probe (`probe`): bursts of 1, 2, 4, 8 prompts from idle, as many as the slots seen hold
  ─► the knee's search (`search`): scan, band search, the knee's repeat, one step past saturation
  ─► the sweep's first saturated level once more: whether the server's speed held
```

Every step runs on a `stepper.Stepper`; every open-loop verdict reads its window's statistics with
intervals (`verdict`): a step is held or failed only when they sit on one side of the bounds, and
measures longer otherwise.

Everything is on the server's clock (the event loop's seconds times `time_scale`: an emulator's
`--time-scale`, 1 for a real server), so a profile of a sped-up emulator reads in the emulator's own seconds.
Any failure ends the run with what it measured so far (`complete` false, no knee unless one was bracketed).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

from lab.clock import ScaledClock
from lab.load.client import CompletionClient
from lab.load.driver import LoadDriver, warm_up
from lab.load.metrics_reader import MetricsReader
from lab.load.server import ProfileFailure, identify
from lab.load.workload import Sampler, longest
from lab.profile.launch import Launched
from lab.profile.output.view import ProgressView
from lab.profile.plan import Budget, BudgetExhausted
from lab.profile.prefill.probe import probe
from lab.profile.schema import Step
from lab.profile.search import KneeSearch
from lab.profile.settings import Run, Settings
from lab.profile.stepper import Stepper
from lab.profile.steps import standing_queue
from lab.profile.sweep import level_lifetime, sweep
from lab.virtual_time import loop_time

# Real seconds between live-view refreshes.
_VIEW_SECONDS = 0.5


class Profiler:
    """Runs one profile; `run()` returns what it measured, `error` set if it stopped early."""

    def __init__(self, settings: Settings, view: ProgressView) -> None:
        self.settings = settings
        self.view = view
        # Both are made again when the run starts, on the loop it runs on (`run`).
        self.clock = ScaledClock(settings.time_scale, monotonic=loop_time)
        self.budget = Budget(settings.budget, settings.time_scale)
        self.result = Run(steps=[])
        self.steps: list[Step] = []
        self.result.steps = self.steps
        self.sampler = Sampler(settings.workload, settings.seed)

    async def run(self) -> Run:
        """Profile the server on the running event loop's clock: the system's, or a virtual-time
        loop's (`lab.virtual_time`) where the server is an emulator in this process, so that what the
        profile measures is the emulator and not the machine's load."""
        s = self.settings
        self.clock = ScaledClock(s.time_scale, monotonic=loop_time)
        self.budget = Budget(s.budget, s.time_scale)
        try:
            # No connection limit: an open-loop step at a high rate holds thousands of streams.
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector) as session, self._launched(session):
                await self._profile(session)
        except (ProfileFailure, BudgetExhausted) as error:
            self.result.error = str(error)
        except BaseException:
            self.result.error = f"interrupted after {len(self.steps)} steps"
            raise
        return self.result

    @contextlib.asynccontextmanager
    async def _launched(self, session: aiohttp.ClientSession) -> AsyncIterator[None]:
        s = self.settings
        if s.launch is None:
            yield
            return
        launched = Launched(s.launch, s.launch_log or Path("server.log"))
        try:
            self.view.message(f"launching: {s.launch}")
            self.result.cold_start_seconds = await launched.start(session, s.url) * s.time_scale
            self.view.message(f"ready after {self.result.cold_start_seconds:.1f}s")
            self.budget = Budget(s.budget, s.time_scale)  # the budget is for measuring, not loading
            yield
        finally:
            await launched.stop()

    async def _profile(self, session: aiohttp.ClientSession) -> None:
        s = self.settings
        identity = await identify(session, s.url, s.model, s.max_num_seqs)
        self.result.server = server = identity.server
        if server.max_model_len is not None and longest(s.workload) > server.max_model_len:
            raise ProfileFailure(
                f"the workload's longest request ({longest(s.workload)} tokens, prompt plus output) exceeds "
                f"the server's max_model_len {server.max_model_len}"
            )
        client = CompletionClient(session, s.url, s.model, self.clock)
        driver = LoadDriver(client, self.sampler, self.clock, s.seed)
        reader = MetricsReader(session, s.url, identity.metrics_model, self.clock, lambda: driver.inflight)
        stepper = Stepper(s, self.view, self.clock, self.budget, self.result, driver, reader)
        reader.start()
        ticker = asyncio.create_task(self._tick(driver, reader))
        try:
            now = self.clock.now()
            self.view.phase("warm-up", now, now)
            e2e = await warm_up(driver)
            self.result.saturated_rate, self.result.saturated_interval = await sweep(stepper, e2e)
            prefill = await probe(stepper)
            if prefill is not None:
                self.result.prefill_interval = (prefill.low, prefill.high)
                self.result.prefill_seconds_per_token = (
                    prefill.seconds_per_token if prefill.resolved else None
                )
            await KneeSearch(stepper).run(self.result.saturated_rate)
            await driver.cancel()  # the overload's backlog is not the next run's business
            await self._speed_again(stepper)
        finally:
            ticker.cancel()
            await driver.cancel()
            await reader.stop()

    async def _tick(self, driver: LoadDriver, reader: MetricsReader) -> None:
        while True:
            snapshot = reader.snapshots[-1] if reader.snapshots else None
            self.view.tick(self.clock.now(), snapshot, driver.inflight, len(driver.outcomes))
            await asyncio.sleep(_VIEW_SECONDS)

    async def _speed_again(self, stepper: Stepper) -> None:
        """The sweep's first saturated closed-loop level once more: whether the server's own speed
        held over the profile (`checks.drift_check`). On a real vLLM 0.26.0 whose engine core was
        CPU-bound, it moved by a third within half an hour (docs/benchmarks.md)."""
        closed = [s for s in self.steps if s.kind == "concurrency" and standing_queue(s)]
        if not closed:
            return
        first = closed[0]
        e2e = level_lifetime(first)
        with contextlib.suppress(BudgetExhausted):
            await stepper.settle()
            await stepper.step(
                "concurrency", float(first.clients or round(first.offered_rate)), e2e, steps_left=1
            )
        await stepper.driver.cancel()
