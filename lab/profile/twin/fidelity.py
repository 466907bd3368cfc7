"""How closely a twin reproduces its server: one sweep of open-loop steps against each, side by side.

`sweep` offers open-loop Poisson arrivals at each rate for a fixed step (after a settle that warms
the queue up), summarizes the step with the profile's own `steps.summarize` (the same verdicts, from
the window's statistics), then waits until every request has finished, so that each step starts
from an idle server. Each step's arrivals and request lengths come from a seed of its own (see
`lab.load.driver`): the server and its twin are offered the same traffic, step for step, and what
differs is the servers.

`compare` lines the two sweeps up per rate and applies the fidelity criteria: running requests
within `RUNNING_TOLERANCE` (or `RUNNING_FLOOR` requests, under light load); the waiting queue's trend of the
same kind (growing: a backlog that the verdict module counts as material, or steady; a trend whose interval
straddles that bound is unclear and disagrees with neither); both on the same side of the TTFT SLO, where one
step next to the knee may differ; and the knees (the highest held rate below the lowest failed, as a long-step
sweep reads it, `knee.bracket`) within `KNEE_TOLERANCE`. The warm-up is the profile's (`load.warm_up`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import aiohttp

from lab.clock import ScaledClock
from lab.load.client import CompletionClient
from lab.load.driver import LoadDriver, warm_up
from lab.load.metrics_reader import MetricsReader
from lab.load.server import identify
from lab.load.workload import Sampler, Workload
from lab.profile import verdict
from lab.profile.knee import bracket
from lab.profile.schema import PercentileSlo, Step
from lab.profile.steps import Window, percentile_key, summarize
from lab.virtual_time import loop_time

RUNNING_TOLERANCE: Final = 0.15
# Under a light load the running count is a few requests, and a minute's mean of it moves by more
# than 15 % between two runs of one server (1.4 in flight over ~50 lifetimes: about +-0.3 requests
# each side); below this many requests apart, two sides are not told apart.
RUNNING_FLOOR: Final = 0.3
KNEE_TOLERANCE: Final = 0.10
DEFAULT_FRACTIONS: Final = (0.3, 0.45, 0.6, 0.75, 0.9, 1.0, 1.1, 1.2)
# A request that has not finished this long after its step ended is abandoned (and counts in the
# step as still waiting): an overloaded server must not hold the sweep forever.
_DRAIN_LIFETIMES: Final = 200.0


@dataclass(frozen=True)
class SweepSettings:
    """One sweep: where, what traffic, which SLO, and how long each step is (server seconds)."""

    url: str
    model: str
    workload: Workload
    slo: PercentileSlo
    step_seconds: float
    settle_seconds: float
    seed: int = 0
    time_scale: float = 1.0


async def sweep(
    settings: SweepSettings, rates: Sequence[float], say: Callable[[str], None] = print
) -> list[Step]:
    """One open-loop step per rate, in order, each from an idle server; `ProfileFailure` if the server
    cannot be reached or every warm-up request fails."""
    clock = ScaledClock(settings.time_scale, monotonic=loop_time)  # virtual on a `VirtualTimeLoop`
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        identity = await identify(session, settings.url, settings.model, None)
        driver = LoadDriver(
            CompletionClient(session, settings.url, settings.model, clock),
            Sampler(settings.workload, settings.seed),
            clock,
            settings.seed,
        )
        reader = MetricsReader(session, settings.url, identity.metrics_model, clock, lambda: driver.inflight)
        reader.interval = min(0.5, max(0.1, clock.real(settings.step_seconds) / 60))
        reader.start()
        try:
            e2e = await warm_up(driver)
            steps = []
            for index, rate in enumerate(rates):
                driver.reseed(f"{settings.seed}:fidelity:{index}")
                start = clock.now()
                settled = start + settings.settle_seconds
                end = settled + settings.step_seconds
                await driver.open_loop(rate, end)
                window = Window.measured("rate", rate, start, settled, end, e2e)
                pending = [(p.sent, p.ttft) for p in driver.pending.values()]
                step = summarize(window, driver.outcomes, pending, reader.between(settled, end), settings.slo)
                steps.append(step)
                say(describe(step, settings.slo))
                await _drain(driver, clock, end + _DRAIN_LIFETIMES * e2e)
            return steps
        finally:
            await driver.cancel()
            await reader.stop()


async def _drain(driver: LoadDriver, clock: ScaledClock, deadline: float) -> None:
    """Wait for every request in flight to finish, until `deadline`; abort the rest."""
    if driver.pending:
        await asyncio.wait(list(driver.pending), timeout=max(0.0, clock.real(deadline - clock.now())))
    await driver.cancel()


def describe(step: Step, slo: PercentileSlo) -> str:
    """One line for a step as it ends."""
    key = percentile_key(slo.percentile)
    ttft = step.ttft_seconds.get(key, math.nan)
    return (
        f"{step.offered_rate:7.3g} req/s  running {step.running:5.1f}  waiting {step.waiting:6.1f}  "
        f"TTFT {key} {ttft * 1000:8.0f} ms  {step.verdict}"
    )


QueueTrend = Literal["growing", "steady", "unclear"]


def queue_trend(step: Step) -> QueueTrend:
    """The waiting queue over the step's later half, by the verdict module's measure of material
    growth: `growing` where the slope's whole interval lies above it, `steady` where it lies at or
    below, `unclear` where the interval straddles it (a step at the knee, whose queue a minute cannot
    call either way)."""
    slope = step.waiting_slope
    if slope is None:
        return "steady"
    # The trend is read over the window's later half (`steps.summarize`).
    stretch = max((step.window_seconds or 0.0) / 2, 1e-9)
    bound = verdict.material_growth(step.offered_rate, stretch)
    if slope.low > bound:
        return "growing"
    return "steady" if slope.high <= bound else "unclear"


def same_trend(server: Step, twin: Step) -> bool:
    """The same kind of trend, where both steps could tell: an unclear one disagrees with neither."""
    kinds = {queue_trend(server), queue_trend(twin)}
    return "unclear" in kinds or len(kinds) == 1


@dataclass(frozen=True)
class Row:
    """One rate, both sides."""

    rate: float
    server: Step
    twin: Step
    running_error: float
    """(twin - server) / server running requests."""
    same_trend: bool
    same_ttft_side: bool


@dataclass(frozen=True)
class Comparison:
    """The two sweeps side by side, and the criteria."""

    rows: list[Row]
    server_knee: float | None
    twin_knee: float | None
    running_ok: bool
    trend_ok: bool
    ttft_side_ok: bool
    knee_ok: bool

    @property
    def ok(self) -> bool:
        """Every criterion holds."""
        return self.running_ok and self.trend_ok and self.ttft_side_ok and self.knee_ok


def _ttft_over(step: Step, slo: PercentileSlo) -> bool:
    value = step.ttft_seconds.get(percentile_key(slo.percentile))
    return value is None or value > slo.ttft_seconds


def _running_close(row: Row) -> bool:
    return (
        abs(row.running_error) <= RUNNING_TOLERANCE
        or abs(row.twin.running - row.server.running) <= RUNNING_FLOOR
    )


def compare(server: Sequence[Step], twin: Sequence[Step], slo: PercentileSlo) -> Comparison:
    """Line up two sweeps of the same rates and apply the fidelity criteria (see the module)."""
    if [s.offered_rate for s in server] != [t.offered_rate for t in twin]:
        raise ValueError("the two sweeps must offer the same rates in the same order")
    rows = [
        Row(
            rate=s.offered_rate,
            server=s,
            twin=t,
            running_error=(t.running - s.running) / s.running if s.running > 0 else math.inf,
            same_trend=same_trend(s, t),
            same_ttft_side=_ttft_over(s, slo) == _ttft_over(t, slo),
        )
        for s, t in zip(server, twin, strict=True)
    ]
    server_step, server_failed = bracket(server)
    twin_step, _ = bracket(twin)
    server_knee = None if server_step is None else server_step.offered_rate
    twin_knee = None if twin_step is None else twin_step.offered_rate
    # One step next to the knee may land on the other side: there the percentile is within noise of
    # the SLO on both servers. "Next to" is the last held or the first failed rate of the server.
    mismatched = [r.rate for r in rows if not r.same_ttft_side]
    beside = {server_knee, server_failed}
    ttft_side_ok = not mismatched or (len(mismatched) == 1 and mismatched[0] in beside)
    knee_ok = (
        server_knee is not None
        and twin_knee is not None
        and abs(twin_knee - server_knee) <= KNEE_TOLERANCE * server_knee
    )
    return Comparison(
        rows=rows,
        server_knee=server_knee,
        twin_knee=twin_knee,
        running_ok=all(_running_close(r) for r in rows),
        trend_ok=all(r.same_trend for r in rows),
        ttft_side_ok=ttft_side_ok,
        knee_ok=knee_ok,
    )


def _ms(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value * 1000:.0f}"


def render(comparison: Comparison, slo: PercentileSlo) -> list[str]:
    """The table (server / twin per column) and the criteria, as lines."""
    key = percentile_key(slo.percentile)
    lines = [
        f"{'rate':>7} | {'running':>13} {'diff':>6} | {'TTFT p50 ms':>13} | {'TTFT ' + key + ' ms':>13} | "
        f"{'TPOT mean ms':>13} | {'waiting (trend/s)':>25} | verdicts",
    ]
    for r in comparison.rows:
        s, t = r.server, r.twin
        trend = [x.waiting_slope.value if x.waiting_slope else math.nan for x in (s, t)]
        lines.append(
            f"{r.rate:7.3g} | {s.running:6.1f}/{t.running:<6.1f} {r.running_error:+6.0%} | "
            f"{_ms(s.ttft_seconds.get('p50')):>6}/{_ms(t.ttft_seconds.get('p50')):<6} | "
            f"{_ms(s.ttft_seconds.get(key)):>6}/{_ms(t.ttft_seconds.get(key)):<6} | "
            f"{(s.tpot_seconds.get('mean') or math.nan) * 1000:6.2f}/"
            f"{(t.tpot_seconds.get('mean') or math.nan) * 1000:<6.2f} | "
            f"{s.waiting:5.1f} ({trend[0]:+5.2f})/{t.waiting:5.1f} ({trend[1]:+5.2f}) | "
            f"{s.verdict}/{t.verdict}"
            + ("" if r.same_ttft_side else "  TTFT sides differ")
            + ("" if r.same_trend else "  trends differ")
        )

    def knee_text(value: float | None) -> str:
        return "none" if value is None else f"{value:.3g} req/s"

    checks = [
        (
            comparison.running_ok,
            f"running within {RUNNING_TOLERANCE:.0%} (or {RUNNING_FLOOR:g} requests) at every rate",
        ),
        (comparison.trend_ok, "waiting trend of the same kind at every rate"),
        (comparison.ttft_side_ok, "same side of the TTFT SLO (one step next to the knee may differ)"),
        (
            comparison.knee_ok,
            f"knees within {KNEE_TOLERANCE:.0%}: server {knee_text(comparison.server_knee)}, "
            f"twin {knee_text(comparison.twin_knee)}",
        ),
    ]
    lines += [f"{'ok  ' if ok else 'FAIL'} {text}" for ok, text in checks]
    return lines
