"""One step of a profile against the server: sized within the budget, loaded, measured longer while
its verdict is undecided, summarized.

A step is open-loop (Poisson arrivals at a rate) or closed-loop (a number of clients). Its length
comes from `plan.size`: a scan or closed-loop step shrinks to its share of the budget, a deciding
one follows the window rule and never shrinks. While an open-loop step's verdict is undecided it
measures on, one deciding window at a time (`plan.extension`), never into the budget kept back for
the knee's repeat (`reserve`).

Everything is on the server's clock (real seconds times the time scale).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import statistics
from collections.abc import Sequence
from typing import Final, Literal

from lab.clock import ScaledClock
from lab.emulator.params import EngineParams
from lab.load.driver import LoadDriver
from lab.load.metrics_reader import MetricsReader
from lab.load.server import ProfileFailure
from lab.profile import plan, verdict
from lab.profile.checks import completed
from lab.profile.knee import interpolate
from lab.profile.output.report import build
from lab.profile.output.view import ProgressView
from lab.profile.plan import Budget
from lab.profile.schema import Step
from lab.profile.settings import Run, Settings
from lab.profile.steps import Window, over_stable_share, standing_queue, summarize
from lab.profile.twin.model import SEEDS, ModelKnee, band, knees
from lab.profile.twin.params import TwinError, twin_params

# A step in which more than this share of requests failed is a broken server, not a slow one.
_FAILED_SHARE: Final = 0.5


def lifetime(steps: Sequence[Step], rate: float) -> float:
    """A request's lifetime expected at `rate`, read off the sweep (throughput against e2e) at its
    levels without a standing queue, held flat beyond the last. At a level with one, the lifetime
    is mostly the clients' wait in that queue, which an open-loop step below saturation does not
    see: on a real batch-bound vLLM, 3.0 s at 64 clients against 1.3-1.4 s measured at 19.2 req/s
    (the line through both read 2.3 s there, and sized the knee's deciding step at 138 s); on a
    KV-bound one, 5.6 s at 64 clients sized a scan step at 1.05 of saturation, failed by
    definition, at 56 s."""
    sweep = [s for s in steps if s.kind == "concurrency"]
    unqueued = [s for s in sweep if not standing_queue(s)] or sweep
    points = sorted((s.achieved_rate, s.e2e_seconds.get("p50", 0.0)) for s in unqueued)
    return max(interpolate(points, rate), points[0][1])


class Stepper:
    """Runs the steps of one profile and keeps them (`steps`), with what the run measured (`result`)."""

    def __init__(
        self,
        settings: Settings,
        view: ProgressView,
        clock: ScaledClock,
        budget: Budget,
        result: Run,
        driver: LoadDriver,
        reader: MetricsReader,
    ) -> None:
        self.settings = settings
        self.view = view
        self.clock = clock
        self.budget = budget
        self.result = result
        assert result.steps is not None
        self.steps: list[Step] = result.steps
        self.driver = driver
        self.reader = reader
        # The knee's repeat, kept back from the budget while the band is searched (`search`): an
        # undecided step measures longer only into what is left beyond it.
        self.reserve: plan.StepPlan | None = None
        # The model's knee (`model`), until an open-loop step confirms or refutes it.
        self._guess: ModelKnee | None = None
        # The twin the model runs and its knee on the first seed (`estimate`), which `model` reuses.
        self._first: tuple[EngineParams, float] | None = None

    @property
    def saturated_rate(self) -> float | None:
        return self.result.saturated_rate

    def lifetime(self, rate: float) -> float:
        """A request's lifetime expected at `rate`, read off the sweep (`lifetime`)."""
        return lifetime(self.steps, rate)

    def throughput(self, step: Step) -> float:
        """Requests per second a step completed (`checks.completed`)."""
        return completed(step, self.settings.workload.output_tokens.mean)

    def over(self, rate: float) -> bool:
        """Whether `rate` lies above the stable share of the saturated throughput (fails by definition)."""
        return over_stable_share(rate, self.result.saturated_rate)

    async def rate(
        self,
        rate: float,
        steps_left: int = 3,
        *,
        deciding: bool = False,
        escalate: bool = False,
        length: float = 1.0,
    ) -> Step:
        """An open-loop step at `rate`, sized by the lifetime expected there (see `step`)."""
        return await self.step(
            "rate", rate, self.lifetime(rate), steps_left, deciding=deciding, escalate=escalate, length=length
        )

    async def settle(self) -> None:
        """Abort what is in flight and wait until the server has nothing running or waiting."""
        await self.driver.cancel()
        deadline = self.clock.now() + 20 * self.lifetime(0.0)
        while self.clock.now() < deadline:
            with contextlib.suppress(Exception):  # a failed read is retried; the deadline bounds it
                snapshot = await self.reader.fetch()
                if snapshot.running + snapshot.waiting == 0:
                    return
            await asyncio.sleep(self.reader.interval)

    async def step(
        self,
        kind: Literal["rate", "concurrency"],
        offered: float,
        e2e: float,
        steps_left: int,
        *,
        deciding: bool = False,
        escalate: bool = False,
        length: float = 1.0,
    ) -> Step:
        """One step. A `deciding` open-loop step follows the window rule (`length` times it) and,
        while its verdict is undecided, measures on one deciding window at a time; an `escalate` scan
        step that ends undecided, or failed by measurement, does the same from its short window on.
        Closed-loop steps and other scan steps end with their window."""
        sized = plan.size(
            self.budget,
            kind,
            offered,
            e2e,
            steps_left,
            deciding=deciding,
            length=length,
            output_tokens=self.settings.workload.output_tokens.mean,
        )
        # A deciding window is the unit an undecided step grows by, up to `1 + DECIDE_EXTENSIONS` of
        # them in all (a step that starts `length` units long grows less).
        unit = plan.deciding_step(e2e, offered).window if kind == "rate" else 0.0
        limit = (1 + plan.DECIDE_EXTENSIONS) * unit if deciding or escalate else 0.0
        start = self.clock.now()
        settled, end = start + sized.settle, start + sized.duration
        label = (
            f"{offered:.3g} req/s (open loop)" if kind == "rate" else f"{offered:.0f} clients (closed loop)"
        )
        self.view.phase(label, start, end)
        # About forty snapshots per window (five per block of the queue's trend), whatever the scale,
        # but at most ~7 reads a real second: each read costs the server a page (60 KB on vLLM) and
        # the client a parse.
        self.reader.interval = min(0.5, max(0.15, self.clock.real(sized.window) / 40))
        # A concurrency step is known by its clients, a rate step by its place among the rate steps:
        # two profiles with the same seed then send each step the same pattern (see `load`).
        ordinal = offered if kind == "concurrency" else sum(1 for s in self.steps if s.kind == "rate")
        self.driver.reseed(f"{self.settings.seed}:{kind}:{ordinal:g}")
        if kind == "rate":
            await self.driver.open_loop(offered, end)
        else:
            await self.driver.closed_loop(round(offered), end)
        while True:
            remaining = self.budget.beyond(self.reserve)
            extension = plan.extension(end - settled, unit, limit, remaining)
            step = await self._summarize(kind, offered, e2e, start, settled, end, final=extension is None)
            if extension is not None and step.verdict == "undecided":
                needed = (end - settled) * self._growth_to_decide(step)
                if plan.extension(end - settled, unit, limit, remaining, needed) is None:
                    # A rate where the server flips: the point estimates decide, marked marginal.
                    extension = None
                    step = await self._summarize(kind, offered, e2e, start, settled, end, final=True)
            # A short scan step that failed by measurement (not by offering more than a stable share
            # of saturation) grows to one deciding window too: it may become the knee band's upper end.
            measured_failure = (
                escalate
                and step.verdict == "failed"
                and end - settled < unit * (1 - 1e-3)
                and not self.over(offered)
            )
            if (
                kind == "concurrency"
                or (step.verdict != "undecided" and not measured_failure)
                or extension is None
            ):
                break
            end += extension
            self.view.phase(label + " (undecided: measuring longer)", start, end)
            await self.driver.open_loop(offered, end)
        self.steps.append(step)
        self.view.step(step)
        if step.requests and step.errors > _FAILED_SHARE * step.requests:
            first = next(o.error for o in reversed(self.driver.outcomes) if o.error)
            raise ProfileFailure(f"{step.errors} of {step.requests} requests failed at {label}: {first}")
        return step

    async def estimate(self) -> float | None:
        """The model's knee on its first seed (`lab.profile.twin.model`): where the knee lies, for the
        search to tell whether the budget holds open-loop steps there; `None` where no twin can be
        fitted."""
        first = await self._first_seed()
        return None if first is None else first[1]

    async def model(self, at: Step | None) -> ModelKnee | None:
        """The model's knee (`lab.profile.twin.model`, on all its seeds), before its open-loop step
        (`at` None), or once the step `at` ran at its lower end: the run's knee unless the step
        failed, decided (refuted: `None`, and the run keeps it for the summary's note); `None` too
        where no twin can be fitted."""
        if at is not None:
            if self._guess is None:
                return None
            self.result.model_knee = self._guess.checked(at)
            return None if self.result.model_knee.check == "refuted" else self.result.model_knee
        first = await self._first_seed()
        if first is None:
            return None
        twin, knee = first
        found = [knee, *await self._knees(twin, SEEDS[1:])]
        top = self.result.saturated_rate or 1.0
        low, high = band(found, top, self.result.saturated_interval)
        self._guess = ModelKnee(statistics.median(found), low, high)
        return self._guess

    async def _first_seed(self) -> tuple[EngineParams, float] | None:
        """The twin of the run so far and the model's knee on its first seed, fitted and run once;
        `None` where no twin can be fitted."""
        if self._first is None:
            try:
                twin = twin_params(build(self.settings, self.result))
            except TwinError:
                return None
            self._first = (twin, (await self._knees(twin, SEEDS[:1]))[0])
        return self._first

    async def _knees(self, twin: EngineParams, seeds: Sequence[int]) -> list[float]:
        """The model's knee on each of `seeds`, the engine `twin`. It runs in a thread, so the event
        loop keeps reading the server's gauges."""
        s, slo, top = self.settings, self.settings.slo, self.result.saturated_rate or 1.0
        prompt = max(1, round(s.workload.prompt_tokens.mean))
        output = max(2, round(s.workload.output_tokens.mean))
        bounds = (slo.ttft_seconds, slo.tpot_seconds)
        w = s.workload
        # A workload of observed pairs: the model draws each request's size from them, as the load does.
        lengths = tuple(zip(w.prompt_tokens.values, w.output_tokens.values, strict=True))
        run = functools.partial(knees, lengths=lengths, seeds=seeds)
        return await asyncio.to_thread(run, twin, top, prompt, output, slo.percentile, bounds)

    def _growth_to_decide(self, step: Step) -> float:
        """`verdict.growth_to_decide` of the step's checks: the miss shares against the SLO's allowed
        share, the queue's trend (over the window's later half) against material growth."""
        allowed = 1 - self.settings.slo.percentile
        stretch = max((step.window_seconds or 0.0) / 2, 1e-9)
        material = verdict.material_growth(step.offered_rate, stretch)
        return verdict.growth_to_decide(
            [(step.ttft_miss, allowed), (step.tpot_miss, allowed), (step.waiting_slope, material)]
        )

    async def _summarize(
        self,
        kind: Literal["rate", "concurrency"],
        offered: float,
        e2e: float,
        start: float,
        settled: float,
        end: float,
        *,
        final: bool,
    ) -> Step:
        with contextlib.suppress(Exception):
            self.reader.snapshots.append(await self.reader.fetch())
        if self.reader.error:
            raise ProfileFailure(self.reader.error)
        window = Window.measured(kind, offered, start, settled, end, e2e)
        pending = [(p.sent, p.ttft) for p in self.driver.pending.values()]
        snapshots = self.reader.between(window.settled, window.end + 1e-9)
        return summarize(
            window,
            self.driver.outcomes,
            pending,
            snapshots,
            self.settings.slo,
            saturated_rate=self.result.saturated_rate,
            final=final,
        )
