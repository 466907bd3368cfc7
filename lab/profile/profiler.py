"""One profiling run, start to end: identify the server, warm it up, sweep, step the rate, find the knee.

```
identify (reachable, vLLM, serves the model) ─► warm-up
  ─► concurrency sweep: 1, 2, 4 … closed-loop clients until a queue stands (TPOT vs batch, the
     saturated throughput; one client alone checks that the SLO can be met at all)
  ─► prefill probe: bursts of 1, 2, 4, 8 prompts from idle, as many as the slots seen hold
  ─► scan: short open-loop Poisson steps at fractions of that throughput, rising until one does not
     hold (an undecided one measures on at the deciding length until it is decided)
  ─► bisection with deciding steps (the window rule of `plan`) between the highest rate that held
     and the lowest that failed, until the band is `plan.BISECT_TOLERANCE` wide
  ─► the knee's rate once more, from idle; if it disagrees with an earlier deciding step, a third,
     longer step decides (a repeat that disagrees with a short scan step is the longer measurement)
  ─► one short step past saturation: the open-loop throughput, to check the closed-loop one
```

Every open-loop verdict reads its window's statistics with intervals (`verdict`): a step is held or
failed only when they sit on one side of the bounds, and measures longer otherwise.

Everything is on the server's clock (real seconds times `time_scale`: an emulator's `--time-scale`,
1 for a real server), so a profile of a sped-up emulator reads in the emulator's own seconds. Any
failure ends the run with what it measured so far (`complete` false, no knee unless one was bracketed).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

import aiohttp

from lab.emulator.runner import ScaledClock
from lab.profile import plan
from lab.profile.checks import completed
from lab.profile.client import CompletionClient, RequestResult
from lab.profile.knee import held, interpolate, plateau, rate_verdicts
from lab.profile.launch import Launched
from lab.profile.load import LoadDriver
from lab.profile.metrics_reader import MetricsReader
from lab.profile.plan import Budget, BudgetExhausted
from lab.profile.prefill import PrefillFit, burst_sizes, fit_prefill, probe_order
from lab.profile.schema import Step
from lab.profile.server import ProfileFailure, identify
from lab.profile.settings import Run, Settings
from lab.profile.steps import STABLE_SHARE, Window, percentile_key, standing_queue, summarize
from lab.profile.view import ProgressView
from lab.profile.workload import Sampler, longest

# Real seconds between live-view refreshes.
_VIEW_SECONDS = 0.5
# A step in which more than this share of requests failed is a broken server, not a slow one.
_FAILED_SHARE = 0.5


class Profiler:
    """Runs one profile; `run()` returns what it measured, `error` set if it stopped early."""

    def __init__(self, settings: Settings, view: ProgressView) -> None:
        self.settings = settings
        self.view = view
        self.clock = ScaledClock(settings.time_scale)
        self.budget = Budget(settings.budget, settings.time_scale)
        self.result = Run(steps=[])
        self.steps: list[Step] = []
        self.result.steps = self.steps
        self.sampler = Sampler(settings.workload, settings.seed)
        self._driver: LoadDriver | None = None
        self._reader: MetricsReader | None = None
        # The knee's repeat (`_confirm`), kept back from the budget while the band is searched: the
        # highest rate that held may have held on a short scan step, and a knee nobody repeated
        # with a deciding step is one run's luck (on a real KV-bound vLLM, 10.5 req/s held on an
        # 11 s scan step in one profile and failed a 3-minute step in the next).
        self._reserve: plan.StepPlan | None = None

    @property
    def driver(self) -> LoadDriver:
        assert self._driver is not None
        return self._driver

    @property
    def reader(self) -> MetricsReader:
        assert self._reader is not None
        return self._reader

    async def run(self) -> Run:
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
        self._driver = LoadDriver(client, self.sampler, self.clock, s.seed)
        self._reader = MetricsReader(
            session, s.url, identity.metrics_model, self.clock, lambda: self.driver.inflight
        )
        self.reader.start()
        ticker = asyncio.create_task(self._tick())
        try:
            e2e = await self._warm_up()
            self.result.saturated_rate = await self._sweep(e2e)
            prefill = await self._prefill()
            if prefill is not None:
                self.result.prefill_interval = (prefill.low, prefill.high)
                self.result.prefill_seconds_per_token = (
                    prefill.seconds_per_token if prefill.resolved else None
                )
            await self._rates(self.result.saturated_rate)
        finally:
            ticker.cancel()
            await self.driver.cancel()
            await self.reader.stop()

    async def _tick(self) -> None:
        while True:
            snapshot = self.reader.snapshots[-1] if self.reader.snapshots else None
            self.view.tick(self.clock.now(), snapshot, self.driver.inflight, len(self.driver.outcomes))
            await asyncio.sleep(_VIEW_SECONDS)

    def _check(self, outcomes: Sequence[RequestResult], what: str) -> list[RequestResult]:
        ok = [o for o in outcomes if o.error is None]
        if not ok:
            first = next((o.error for o in outcomes if o.error), "no request was sent")
            raise ProfileFailure(f"every {what} request failed: {first}")
        return ok

    async def _warm_up(self) -> float:
        """A few requests two at a time (caches, compiled graphs); the unloaded request lifetime."""
        now = self.clock.now()
        self.view.phase("warm-up", now, now)
        outcomes: list[RequestResult] = []
        for _ in range(plan.WARMUP_REQUESTS // 2):
            outcomes += await asyncio.gather(*(self.driver.one(*self.sampler.draw()) for _ in range(2)))
        ok = self._check(outcomes, "warm-up")
        return statistics.median(o.e2e for o in ok if o.e2e is not None)

    async def _prefill(self) -> PrefillFit | None:
        """The prefill probe (`prefill`): bursts of requests of the workload's mean prompt sent at once
        from idle, in interleaved rounds after one unfitted round; each burst's point is its prompt
        tokens and its mean TTFT, the server's own (its histogram's Δsum/Δcount when it counted exactly
        this burst; the client's timing carries the network's jitter, the emulator's is scaled with its
        clock), else the client's last. The burst's requests prefill in one step while they fit the
        token budget (vLLM's default 8,192 holds the 8B engine's eight 1,024-token prompts), so their
        mean is the step's end. The background reader pauses meanwhile: a `/metrics` page rendered
        while a burst waits would add its time to that burst alone."""
        server = self.result.server
        prompt = round(self.settings.workload.prompt_tokens.mean)
        # Slots the server was seen to run at once in the sweep, when neither flag nor server says.
        seen = max((round(s.running) for s in self.steps if s.kind == "concurrency"), default=0)
        slots = self.settings.max_num_seqs or (server.max_num_seqs if server else None) or seen or None
        kv = (
            server.num_gpu_blocks * server.block_size
            if server and server.num_gpu_blocks and server.block_size
            else None
        )
        sizes = burst_sizes(slots, prompt, kv)
        if len(sizes) < 2:
            return None  # one burst size fits no slope
        await self._settle()  # the sweep's last level left a standing queue
        now = self.clock.now()
        self.view.phase(f"prefill probe (bursts of {', '.join(map(str, sizes))} x {prompt} tokens)", now, now)
        fitted: list[tuple[float, float]] = []
        await self.reader.stop()
        try:
            before = await self.reader.fetch()
            for sent, size in enumerate(probe_order(sizes, 1 + plan.PREFILL_ROUNDS, self.settings.seed)):
                outcomes = await asyncio.gather(
                    *(self.driver.one(self.sampler.prompt(prompt), 2) for _ in range(size))
                )
                ttfts = [o.ttft for o in self._check(outcomes, "prefill probe") if o.ttft is not None]
                after = await self.reader.fetch()
                counted, before = after.ttft.minus(before.ttft), after
                if len(ttfts) < size:
                    continue  # a burst with a failed request did not prefill all its tokens
                point = (
                    float(size * prompt),
                    counted.mean if counted.count == size and counted.mean else max(ttfts),
                )
                self.result.prefill_probe.append(point)
                if sent >= len(sizes):
                    fitted.append(point)
        finally:
            self.reader.start()
        return fit_prefill(fitted)

    def _size(self, kind: Literal["rate", "concurrency"], offered: float, e2e: float, steps_left: int,
              deciding: bool) -> plan.StepPlan:  # fmt: skip
        if deciding:
            return self.budget.require(plan.deciding_step(e2e, offered))
        if kind == "rate":
            planned = plan.plan_step(e2e, offered, plan.RATE_REQUESTS, plan.SCAN_LIFETIMES)
            return self.budget.fit(planned, e2e, offered, steps_left, plan.MIN_RATE_REQUESTS)
        planned = plan.plan_step(e2e, offered / e2e, plan.CONCURRENCY_REQUESTS)
        return self.budget.fit(planned, e2e, offered / e2e, steps_left, plan.MIN_CONCURRENCY_REQUESTS)

    async def _step(
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
        sized = self._size(kind, offered, e2e, steps_left, deciding)
        if length != 1.0:
            sized = self.budget.require(plan.StepPlan(sized.settle, sized.window * length))
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
            extension = plan.extension(end - settled, unit, limit, self.budget.beyond(self._reserve))
            step = await self._summarize(kind, offered, e2e, start, settled, end, final=extension is None)
            # A short scan step that failed by measurement (not by offering more than a stable share
            # of saturation) grows to one deciding window too: it may become the knee band's upper end.
            measured_failure = (
                escalate
                and step.verdict == "failed"
                and end - settled < unit * (1 - 1e-3)
                and not self._over(offered)
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

    async def _summarize(self, kind: Literal["rate", "concurrency"], offered: float, e2e: float, start: float,
                         settled: float, end: float, *, final: bool) -> Step:  # fmt: skip
        with contextlib.suppress(Exception):
            self.reader.snapshots.append(await self.reader.fetch())
        if self.reader.error:
            raise ProfileFailure(self.reader.error)
        window = Window.measured(kind, offered, start, settled, end, e2e)
        pending = [(p.sent, p.ttft) for p in self.driver.pending.values()]
        snapshots = self.reader.between(window.settled, window.end + 1e-9)
        return summarize(window, self.driver.outcomes, pending, snapshots, self.settings.slo,
                         saturated_rate=self.result.saturated_rate, final=final)  # fmt: skip

    async def _sweep(self, e2e: float) -> float:
        """Closed-loop clients doubling until a queue stands, and once more beyond; the saturated
        throughput is fitted across the steps on the plateau (`knee.plateau`), not read off one."""
        clients, previous, flat, beyond = 1, None, 0, False
        slo, key = self.settings.slo, percentile_key(self.settings.slo.percentile)
        while True:
            step = await self._step("concurrency", clients, e2e, steps_left=5 + len(plan.RATE_FRACTIONS))
            if clients == 1:
                for name, value, bound, flag in (
                    ("TTFT", step.ttft_seconds.get(key), slo.ttft_seconds, "--slo-ttft"),
                    ("TPOT", step.tpot_seconds.get(key), slo.tpot_seconds, "--slo-tpot"),
                ):
                    if value is not None and value > bound:
                        raise ProfileFailure(
                            f"the SLO cannot be met: one request at a time already has {name} {key} "
                            f"{value * 1000:.0f}ms, above {flag} {bound * 1000:.0f}ms"
                        )
            # Saturated: a queue of at least half the batch stands at the server, so a slot that frees
            # is refilled at once (with a thinner one, clients busy between requests leave slots idle
            # and the throughput reads low); or doubling the clients twice in a row gained nothing
            # (a server whose queue the gauge does not show); one flat step may be noise.
            flat = (
                0
                if previous is None or self._throughput(step) > 1.05 * self._throughput(previous)
                else flat + 1
            )
            saturated = step.waiting >= max(1.0, 0.5 * step.running) or flat >= 2
            if beyond or clients * 2 > plan.MAX_CLIENTS or (saturated and flat >= 2):
                closed = [s for s in self.steps if s.kind == "concurrency"]
                value, low, high = plateau([(self._throughput(s), standing_queue(s)) for s in closed])
                self.result.saturated_interval = (low, high)
                return value
            beyond = saturated  # one level past the first standing queue: the plateau needs two points
            previous, clients = step, clients * 2
            # Little's law: the next level's lifetime, had the throughput stopped growing.
            e2e = max(step.e2e_seconds.get("p50", e2e), clients / max(step.achieved_rate, 1e-9))

    def _throughput(self, step: Step) -> float:
        """Requests per second a step completed (`checks.completed`)."""
        return completed(step, self.settings.workload.output_tokens.mean)

    def _lifetime(self, rate: float) -> float:
        """A request's lifetime expected at `rate`, read off the sweep (throughput against e2e) at its
        levels without a standing queue, held flat beyond the last. At a level with one, the lifetime
        is mostly the clients' wait in that queue, which an open-loop step below saturation does not
        see: on a real batch-bound vLLM, 3.0 s at 64 clients against 1.3-1.4 s measured at 19.2 req/s
        (the line through both read 2.3 s there, and sized the knee's deciding step at 138 s); on a
        KV-bound one, 5.6 s at 64 clients sized a scan step at 1.05 of saturation, failed by
        definition, at 56 s."""
        sweep = [s for s in self.steps if s.kind == "concurrency"]
        unqueued = [s for s in sweep if not standing_queue(s)] or sweep
        points = sorted((s.achieved_rate, s.e2e_seconds.get("p50", 0.0)) for s in unqueued)
        return max(interpolate(points, rate), points[0][1])

    async def _rate(self, rate: float, steps_left: int = 3, **how: Any) -> Step:
        return await self._step("rate", rate, self._lifetime(rate), steps_left, **how)

    async def _settle(self) -> None:
        """Abort what is in flight and wait until the server has nothing running or waiting."""
        await self.driver.cancel()
        deadline = self.clock.now() + 20 * self._lifetime(0.0)
        while self.clock.now() < deadline:
            with contextlib.suppress(Exception):  # a failed read is retried; the deadline bounds it
                snapshot = await self.reader.fetch()
                if snapshot.running + snapshot.waiting == 0:
                    return
            await asyncio.sleep(self.reader.interval)

    async def _rates(self, saturated: float) -> None:
        """Scan, bisect, repeat the knee, then one step past saturation (see the module docstring).

        The scan's rates are fractions of the saturated throughput, or of the throughput at the first
        concurrency that broke the SLO when one did below saturation (the knee lies lower there).
        """
        broke = [s for s in self.steps if s.kind == "concurrency" and not s.slo_met]
        scale = min(saturated, self._throughput(broke[0])) if broke else saturated
        fractions = list(plan.RATE_FRACTIONS)
        passed: float | None = None
        failed: float | None = None
        await self._settle()  # the sweep's last level left a standing queue
        near = False
        while failed is None:
            fraction = fractions.pop(0) if fractions else (passed or scale) / scale * plan.BEYOND
            # Once a short step could not decide, the knee is near: a short step above it would hold
            # or fail by the bursts it happened to catch, so every further rate gets a deciding step,
            # except one above the stable share of saturation: it fails by definition, so a deciding
            # step's length there decides nothing and takes budget the band below the knee may lack.
            rate = fraction * scale
            step = await self._rate(
                rate, steps_left=len(fractions) + 5, escalate=True, deciding=near and not self._over(rate)
            )
            near = (
                near or step.marginal or (step.window_seconds or 0.0) > self._short_window(step.offered_rate)
            )
            if held(step):
                passed = step.offered_rate
                self._reserve = self._deciding(passed)
            else:
                failed = step.offered_rate
        for _round in range(3):
            passed = await self._bisect(passed, min(failed, STABLE_SHARE * saturated))
            if await self._confirm(passed):
                break
            # The knee's rate did not hold on the repeat: it is the new upper end, and the band is
            # searched again below it from the highest rate that still holds.
            failed = passed
            below = [s.offered_rate for s in rate_verdicts(self.steps) if held(s) and s.offered_rate < failed]
            passed = max(below) if below else None
        with contextlib.suppress(BudgetExhausted):
            await self._settle()
            await self._rate(plan.OVERLOAD_FRACTION * saturated, steps_left=2)
        await self.driver.cancel()  # the overload's backlog is not the next run's business
        await self._speed_again()

    async def _speed_again(self) -> None:
        """The sweep's first saturated closed-loop level once more: whether the server's own speed
        held over the profile (`checks.drift_check`). On a real vLLM 0.26.0 whose engine core was
        CPU-bound, it moved by a third within half an hour (docs/benchmarks.md)."""
        closed = [s for s in self.steps if s.kind == "concurrency" and standing_queue(s)]
        if not closed:
            return
        first = closed[0]
        with contextlib.suppress(BudgetExhausted):
            await self._settle()
            await self._step("concurrency", float(first.clients or round(first.offered_rate)),
                             first.e2e_seconds.get("p50", 1.0), steps_left=1)  # fmt: skip
        await self.driver.cancel()

    def _over(self, rate: float) -> bool:
        """Whether `rate` lies above the stable share of the saturated throughput (fails by definition)."""
        saturated = self.result.saturated_rate
        return saturated is not None and rate > STABLE_SHARE * saturated * (1 + 1e-9)

    def _short_window(self, rate: float) -> float:
        """The window of a scan step at `rate` (a step measured longer than this escalated)."""
        return (
            plan.plan_step(self._lifetime(rate), rate, plan.RATE_REQUESTS, plan.SCAN_LIFETIMES).window * 1.001
        )

    def _deciding(self, rate: float) -> plan.StepPlan:
        """The deciding step at `rate` (the window rule at the lifetime expected there)."""
        return plan.deciding_step(self._lifetime(rate), rate)

    async def _bisect(self, passed: float | None, failed: float) -> float:
        """Deciding steps between `passed` and `failed` until the band is narrow, each only while the
        budget still holds the knee's repeat after it (a wider band, said so in the summary, costs
        less than an unrepeated knee); the highest rate held."""
        for _ in range(plan.MAX_BISECTIONS):
            if passed is not None and failed - passed <= plan.BISECT_TOLERANCE * failed:
                break
            rate = failed / 2 if passed is None else (passed + failed) / 2
            self._reserve = None if passed is None else self._deciding(passed)
            if passed is not None and not self.budget.holds(self._deciding(rate), self._reserve):
                break
            await self._settle()
            try:
                step = await self._rate(rate, deciding=True)
            except BudgetExhausted:
                if passed is not None:
                    return passed  # the band stands as wide as measured; the summary says so
                raise
            if held(step):
                passed = rate
            else:
                failed = rate
        if passed is None:
            raise ProfileFailure(
                f"no offered rate held the SLO with a stable queue, down to {failed:.3g} req/s"
            )
        return passed

    async def _confirm(self, rate: float) -> bool:
        """The knee's rate once more, from an idle server, with a deciding step: near the knee a step
        depends on the queue the step before left and on the bursts it caught. If the repeat
        disagrees with an earlier deciding step, a third step twice as long decides (never the luckier
        of the two); one that disagrees with a short scan step is the longer measurement and decides
        alone (`knee.rate_verdicts`), and the budget a third step would take searches the band below
        instead (on a real KV-bound vLLM, 10.2 req/s held an 11 s scan step and failed its 62 s
        repeat; the third step did not fit, and the band below stayed 20 % wide). Whether the rate
        holds; with no budget left for the repeat, the knee stands as found (the summary's repeat
        check says it was not repeated)."""
        earlier = next(s for s in rate_verdicts(self.steps) if s.offered_rate == rate)
        first = held(earlier)
        scanned = (earlier.window_seconds or 0.0) < self._deciding(rate).window * (1 - 1e-3)
        self._reserve = None
        try:
            await self._settle()
            repeat = held(await self._rate(rate, deciding=True))
            if repeat != first and not scanned:
                await self._settle()
                repeat = held(await self._rate(rate, deciding=True, length=2.0))
        except BudgetExhausted:
            return True
        return repeat
