"""The questions asked of one variant's engine, once per seed: capacity, useful-work cost, boundary.

Per seed, on the engine already started and healthy:

```
saturation: closed-loop clients keep a queue standing ─► the saturated throughput (req/s)
knee: bisection of open-loop rates in [knee_low, 0.95] x saturated ─► the knee's band
cost: GPU-seconds per request that met the SLO, at the knee's step and at the catalog's fixed rate
boundary (when asked of this variant):
  prompt: bisection of prompt lengths at the fixed rate ─► where the SLO starts to fail
  rate: saturation and knee search at the fixed long prompt ─► the rate where it starts to fail
```

A seed that cannot be answered (the engine completed nothing at saturation) raises `ProfileFailure`;
the runner records it as that seed's failure and goes on (`runner`).

Rates above `STABLE_SHARE` of the saturated throughput fail by definition (the profile's rule: no
queue is stable there), so the knee's search never spends a step on them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lab.experiments.catalog import Catalog
from lab.experiments.probe import EngineProbe, Measured
from lab.experiments.search import Band, bisect, significant
from lab.load.server import ProfileFailure
from lab.load.workload import Workload, fixed
from lab.profile.checks import completed
from lab.profile.knee import held
from lab.profile.schema import Step
from lab.profile.steps import STABLE_SHARE, percentile_key


@dataclass(frozen=True)
class Cost:
    """Useful work at one rate: GPU-seconds per request that met the SLO, and whether the step held."""

    rate: float
    gpu_seconds: float | None
    """`None` when no request of the step met the SLO."""
    held: bool
    good_share: float
    """Requests of the window that met both objectives, over those sent."""


@dataclass
class Repeat:
    """What one seed measured on one engine (complete or not: fields stay `None` until measured)."""

    seed: int
    saturated: float | None = None
    """Requests per second completed with a standing queue (closed loop)."""
    knee: Band | None = None
    knee_cost: Cost | None = None
    rate_cost: Cost | None = None
    prompt_boundary: Band | None = None
    rate_boundary: Band | None = None
    steps: list[tuple[str, Step]] = field(default_factory=list)
    """(what it measured, the step) of every step, in order."""
    complete: bool = False
    """Every question was answered: only complete seeds are judged (`gates`)."""
    failed: str | None = None
    """Why this seed's measurement stopped short (its fields so far are kept, not judged)."""


Say = Callable[[str], None]


class Questions:
    """Asks one variant's engine the catalog's questions, seed by seed (`run`)."""

    def __init__(self, catalog: Catalog, probe: EngineProbe, boundary: bool, say: Say) -> None:
        self.catalog = catalog
        self.probe = probe
        self.boundary = boundary
        self.say = say

    async def run(self, seed: int, into: Repeat) -> Repeat:
        """Every question for `seed`, filling `into` as each answer comes (a stopped run keeps them)."""
        c = self.catalog
        if c.capacity:
            into.saturated, into.knee, knee_step = await self._knee(seed, c.workload, "knee", into)
            if knee_step is not None:
                into.knee_cost = self._cost(knee_step)
        if c.cost_rate is not None:
            into.rate_cost = self._cost(await self._rate(seed, c.cost_rate, c.workload, "cost", into))
        if self.boundary and c.boundary is not None:
            if c.boundary.prompt is not None:
                into.prompt_boundary = await self._prompt_boundary(seed, into)
            if c.boundary.rate is not None:
                r = c.boundary.rate
                long = fixed(r.prompt_tokens, r.output_tokens)
                _sat, into.rate_boundary, _step = await self._knee(seed, long, "boundary-rate", into, r.steps)
        into.complete = True
        return into

    def _cost(self, measured: Measured) -> Cost:
        sent = measured.step.requests
        return Cost(
            measured.step.offered_rate,
            measured.cost(self.catalog.engine.gpus),
            held(measured.step),
            measured.good / sent if sent else 0.0,
        )

    async def _rate(
        self,
        seed: int,
        rate: float,
        workload: Workload,
        what: str,
        into: Repeat,
        saturated: float | None = None,
    ) -> Measured:
        measured = await self.probe.step("rate", rate, workload, f"{seed}:{what}:{rate:.6g}", saturated)
        into.steps.append((what, measured.step))
        verdict = "held" if held(measured.step) else "failed"
        key = percentile_key(self.catalog.slo.percentile)
        self.say(f"seed {seed} {what}: {significant(rate)} req/s {verdict} ({_latency(measured.step, key)})")
        return measured

    async def _knee(
        self, seed: int, workload: Workload, what: str, into: Repeat, steps: int | None = None
    ) -> tuple[float, Band, Measured | None]:
        """The saturated throughput of `workload`, then the knee's band below it; the knee's step."""
        m = self.catalog.measure
        sat = await self.probe.step("concurrency", m.clients, workload, f"{seed}:{what}:saturate")
        into.steps.append((f"{what}-saturation", sat.step))
        saturated = completed(sat.step, workload.output_tokens.mean)
        if not saturated > 0:
            # No knee lies below a throughput of nothing: the search's range would be empty.
            raise ProfileFailure(
                f"the engine completed nothing at saturation ({m.clients} clients for {m.step:g}s): "
                "no knee to search below it"
            )
        self.say(f"seed {seed} {what}: saturated {significant(saturated)} req/s with {m.clients} clients")
        found: dict[float, Measured] = {}

        async def probe(rate: float) -> bool:
            found[rate] = await self._rate(seed, rate, workload, what, into, saturated)
            return held(found[rate].step)

        band = await bisect(probe, m.knee_low * saturated, STABLE_SHARE * saturated, steps or m.knee_steps)
        return saturated, band, found.get(band.held) if band.held_measured else None

    async def _prompt_boundary(self, seed: int, into: Repeat) -> Band:
        boundary = self.catalog.boundary
        assert boundary is not None and boundary.prompt is not None
        p = boundary.prompt

        async def probe(tokens: float) -> bool:
            measured = await self._rate(
                seed, p.rate, fixed(round(tokens), p.output_tokens), f"boundary-prompt-{round(tokens)}", into
            )
            return held(measured.step)

        return await bisect(probe, p.low, p.high, p.steps, geometric=True, integer=True)


def _latency(step: Step, key: str) -> str:
    """`TTFT p90 212ms, TPOT p90 31ms, waiting 0.4`: why a step held or failed, in brief."""
    ttft, tpot = step.ttft_seconds.get(key), step.tpot_seconds.get(key)
    parts = [
        f"TTFT {key} {ttft * 1000:.0f}ms" if ttft is not None else "no TTFT",
        f"TPOT {key} {tpot * 1000:.1f}ms" if tpot is not None else "no TPOT",
        f"waiting {step.waiting:.1f}",
    ]
    return ", ".join(parts)
