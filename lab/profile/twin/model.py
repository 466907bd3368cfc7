"""The knee of a model of the server, where open-loop steps cannot decide one within the budget.

A request that lives L seconds needs a deciding window of tens of lifetimes before its percentile
and queue trend separate from the bursts (`plan`): at six-second lifetimes the sweep and the scan
alone take most of a 10-minute budget, and reasoning-length outputs live 20-80 s. What the profile
does know by then is the engine: TPOT against batch size from the closed-loop sweep, the prefill
cost from the probe, the slots and KV blocks the server reports (`twin.twin_params`). Run on
virtual time with Poisson arrivals, that engine gives the latencies at any rate for thousands of
requests in a second of CPU, so the knee of the model is the rate where its percentile meets the SLO.

The model's **band** is what its inputs and its own sampling allow: the knee on three seeds of
arrivals, widened by the saturated throughput's interval (the engine's speed, which the step times
carry). It is **checked by one open-loop step** at the band's lower end, the knee reported, as long
as the budget holds (`search`): only a *decided* failure there refutes the model. A step that ends
marginal (undecided at its longest: its miss share within its own noise of the allowed share) can
neither confirm nor refute it, so the model's knee stands and the summary says the check was
marginal. A refuted model gives way to what the open-loop steps measure: the search steps down
from the refuted rate, and the knee is the highest rate held, its band up to the refuted one. Why not scale
the model to that step: near the knee a percentile of TTFT is set by rare busy periods, many lifetimes long,
that a window of a few hundred requests mostly misses (on the six-second emulator a 230 s step at the model's
knee read a p90 of 123 ms against the 470 ms of 2,500 modelled requests, its batch-means interval [0.15, 0.37]
of the model's): a short step can refute the model's knee, but not measure it.

What the band leaves out is what the twin leaves out (`twin`): the front end's delay growing with
load, a slower decode with hundreds waiting, the engine core's CPU speed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from lab.emulator.engine import Engine
from lab.emulator.params import EngineParams
from lab.profile.knee import held
from lab.profile.schema import Step
from lab.simulated_serving import serve, tpot
from lab.stats import percentile

#: requests the model runs per rate (the first `_WARM` of them fill the batch, unmeasured): its p90
#: is then good to a few percent, so the model's own noise stays well inside a band of ±5 %
MODEL_REQUESTS = 2500
_WARM = 0.1
#: bisection of the model's knee down to this share of the rate
_RESOLUTION = 0.005
SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class ModelPoint:
    """The model's latencies at one rate, at the SLO's percentile (inf where requests never finished)."""

    rate: float
    ttft: float
    tpot: float


def simulate(
    params: EngineParams,
    rate: float,
    prompt: int,
    output: int,
    q: float,
    seed: int = 0,
    requests: int = MODEL_REQUESTS,
    *,
    lengths: Sequence[tuple[int, int]] = (),
) -> ModelPoint:
    """Poisson arrivals at `rate` on an engine of `params` on virtual time (`lab.simulated_serving.serve`,
    without step jitter, run to a deadline): TTFT and TPOT at quantile `q`.

    Each request is `prompt`/`output` tokens long, or, given `lengths` (the workload's observed
    (prompt, output) pairs), a pair drawn from them: a mix of long and short requests queues more
    than its mean request does (long prompts' prefills and long outputs hold slots in bursts), so a
    knee of the mean alone is optimistic."""
    draw = random.Random(seed)
    stream, at = [], 0.0
    for _ in range(requests):
        at += draw.expovariate(rate)
        size = lengths[draw.randrange(len(lengths))] if lengths else (prompt, output)
        stream.append((at, max(1, size[0]), max(2, size[1])))
    longest = max((o for _p, o in lengths), default=output)
    # A queue that grows leaves the last requests unfinished by a deadline a stable one meets easily.
    deadline = at * 1.5 + 100 * longest * params.step_seconds(params.max_num_seqs, params.max_num_seqs)
    engine = Engine(replace(params, step_jitter=0.0), seed=seed)
    measured = serve([engine], stream, until=deadline)[int(_WARM * requests) :]
    ttfts = [r.ttft if r.ttft is not None else math.inf for r in measured]
    tpots = [math.inf if (t := tpot(r)) is None else t for r in measured]
    return ModelPoint(rate, percentile(ttfts, q), percentile(tpots, q))


def knee_of(latency: Callable[[float], float], low: float, high: float, bound: float) -> float:
    """The highest rate in [low, high] whose `latency` is at most `bound` (bisection: the latency
    rises with the rate); `low` where even it is above."""
    if latency(low) > bound:
        return low
    if latency(high) <= bound:
        return high
    while high - low > _RESOLUTION * high:
        middle = (low + high) / 2
        if latency(middle) <= bound:
            low = middle
        else:
            high = middle
    return low


def knees(
    params: EngineParams,
    top: float,
    prompt: int,
    output: int,
    q: float,
    bounds: tuple[float, float],
    *,
    lengths: Sequence[tuple[int, int]] = (),
    seeds: Sequence[int] = SEEDS,
) -> list[float]:
    """The model's knee below `top` on each of `seeds` (other arrivals and, given `lengths`, other
    request sizes drawn from them: the model's own sampling)."""

    def at(seed: int) -> float:
        def excess(rate: float) -> float:
            point = simulate(params, rate, prompt, output, q, seed=seed, lengths=lengths)
            return max(point.ttft / bounds[0], point.tpot / bounds[1])

        return knee_of(excess, 0.1 * top, top, 1.0)

    return [at(seed) for seed in seeds]


def band(
    found: Sequence[float], saturated: float, interval: tuple[float, float] | None
) -> tuple[float, float]:
    """The band of the model's knees `found`: their spread, widened by the saturated throughput's
    interval (the engine's speed, which the model's step times carry, and a knee moves with it)."""
    low, high = interval or (saturated, saturated)
    return min(found) * min(1.0, low / saturated), max(found) * max(1.0, high / saturated)


@dataclass(frozen=True)
class ModelKnee:
    """The model's knee, with its band, and what the open-loop step at the band's lower end made of it."""

    rate: float
    low: float
    high: float
    at: float | None = None
    """The rate of the open-loop step that checked it (`None` before it ran)."""
    check: Literal["held", "marginal", "refuted"] | None = None
    """That step's verdict on the model: it held; it ended marginal (undecided at its longest, which
    neither confirms nor refutes); it failed, decided (the model is refuted)."""

    def checked(self, step: Step) -> ModelKnee:
        """The model as the open-loop `step` at its lower end leaves it: only a decided failure refutes it."""
        check: Literal["held", "marginal", "refuted"] = (
            "marginal" if step.marginal else "held" if held(step) else "refuted"
        )
        return replace(self, at=step.offered_rate, check=check)

    def describe(self) -> str:
        at = self.at or self.low
        verdict = (
            f"the open-loop step at {at:.3g} req/s ended marginal (undecided at its longest, its miss share "
            "within its own noise of the SLO's: it neither confirms nor refutes the model)"
            if self.check == "marginal"
            else f"an open-loop step held at {at:.3g} req/s"
        )
        return (
            "a model knee: the engine the sweep and probe "
            "measured, run on virtual time with Poisson arrivals "
            f"({MODEL_REQUESTS} requests a rate, {len(SEEDS)} "
            f"seeds), its percentile at the SLO at {self.rate:.3g} "
            f"req/s, [{self.low:.3g}, {self.high:.3g}] across "
            "the seeds and the saturated throughput's interval; "
            f"{verdict}"
        )

    def refutation(self) -> str:
        """The summary's note on a refuted model."""
        return (
            f"the model's knee {self.low:.3g} req/s (band "
            f"[{self.low:.3g}, {self.high:.3g}], the engine on virtual "
            "time) was refuted: the open-loop step at "
            f"{self.at or self.low:.3g} req/s failed, decided; the knee "
            "is what the open-loop steps measured, the highest rate held below it"
        )
