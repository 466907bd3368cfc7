"""The knee of a model of the server, where open-loop steps cannot decide one within the budget.

A request that lives L seconds needs a deciding window of tens of lifetimes before its percentile
and queue trend separate from the bursts (`plan`): at six-second lifetimes the sweep and the scan
alone take most of a 10-minute budget, and reasoning-length outputs live 20-80 s. What the profile
does know by then is the engine: TPOT against batch size from the closed-loop sweep, the prefill
cost from the probe, the slots and KV blocks the server reports (`twin.twin_params`). Run on
virtual time with Poisson arrivals, that engine gives the latencies at any rate for thousands of
requests in a second of CPU, so the knee of the model is the rate where its percentile meets the SLO.

The model is then **calibrated by one open-loop step** near its knee, as long as the budget holds
(`search`): the step's percentile, with its batch-means interval (`verdict.percentile_interval`),
against the model's at the same rate. What the model lacks (the front end's delay under load, a
slower decode with requests waiting) shows as a ratio between the two; the knee is where the model's
percentile times that ratio meets the SLO, and its band where it does at the ratio's interval ends.
Near the knee the percentile climbs steeply with the rate, so a wide interval on a short step
narrows to a band of a few percent in rate: the steepness the open loop cannot resolve in a short
window is what the model supplies.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from lab.emulator.engine import Engine
from lab.emulator.params import EngineParams
from lab.stats import percentile

#: requests the model runs per rate (the first `_WARM` of them fill the batch, unmeasured): its p90
#: is then good to a few percent, so the model's own noise stays well inside a band of ±5 %
MODEL_REQUESTS = 2500
_WARM = 0.1
#: bisection of the model's knee down to this share of the rate
_RESOLUTION = 0.01
#: the calibrated knee is looked for within this share of the uncalibrated one, on a grid this fine
GRID_REACH = 0.3
GRID_STEP = 0.025


@dataclass(frozen=True)
class ModelPoint:
    """The model's latencies at one rate, at the SLO's percentile (inf where requests never finished)."""

    rate: float
    ttft: float
    tpot: float


def simulate(params: EngineParams, rate: float, prompt: int, output: int, q: float, seed: int = 0,
             requests: int = MODEL_REQUESTS) -> ModelPoint:  # fmt: skip
    """Poisson arrivals at `rate` on an engine of `params` on virtual time: TTFT and TPOT at quantile `q`."""
    engine = Engine(replace(params, step_jitter=0.0), seed=seed)
    draw = random.Random(seed)
    sent, at = [], 0.0
    for _ in range(requests):
        at += draw.expovariate(rate)
        sent.append(engine.submit(prompt, output, ignore_eos=True, at=at))
    # A queue that grows leaves the last requests unfinished by a deadline a stable one meets easily.
    engine.run_until(at * 1.5 + 100 * output * params.step_seconds(params.max_num_seqs, params.max_num_seqs))
    measured = sent[int(_WARM * requests) :]
    ttfts = [r.ttft if r.ttft is not None else math.inf for r in measured]
    tpots = [
        (r.last_token - r.first_token) / (r.num_output - 1)
        if r.last_token is not None and r.first_token is not None and r.num_output > 1
        else math.inf
        for r in measured
    ]
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


def curve(params: EngineParams, rates: Sequence[float], prompt: int, output: int, q: float) -> list[ModelPoint]:
    """The model at each of `rates` (one seed for all: the same arrival pattern, stretched, so the
    curve rises smoothly with the rate)."""
    return [simulate(params, r, prompt, output, q) for r in sorted(rates)]


def crossing(points: Sequence[ModelPoint], scale: tuple[float, float], bounds: tuple[float, float]) -> float:
    """The highest rate on the polyline through `points` (by rate) where TTFT and TPOT times `scale`
    stay within `bounds`: where the first point above either bound is reached, interpolated from
    the point before it; the lowest rate where even it is above, the highest where none is."""
    def excess(p: ModelPoint) -> float:
        return max(p.ttft * scale[0] / bounds[0], p.tpot * scale[1] / bounds[1])

    previous = None
    for point in points:
        over = excess(point)
        if over > 1.0:
            if previous is None:
                return point.rate
            below = excess(previous)
            if not math.isfinite(over):
                return previous.rate
            return previous.rate + (point.rate - previous.rate) * (1.0 - below) / (over - below)
        previous = point
    return points[-1].rate


def grid(knee: float, top: float) -> list[float]:
    """Rates around an uncalibrated model knee where the calibrated one is looked for: ±`GRID_REACH`
    of it in steps of `GRID_STEP` (the percentile is near linear over a step), none above `top`."""
    count = round(GRID_REACH / GRID_STEP)
    return [r for i in range(-count, count + 1) if (r := knee * (1 + i * GRID_STEP)) <= top]


@dataclass(frozen=True)
class ModelKnee:
    """The model's knee scaled to what one open-loop step measured, with its band."""

    rate: float
    low: float
    high: float
    ratio: tuple[float, float, float]
    at: float = 0.0
    """The rate of the open-loop step the model was scaled to."""
    """The measured percentile over the model's at the step's rate: value, low and high end."""

    def describe(self) -> str:
        return (
            f"a model knee: the engine the sweep and probe measured, run on virtual time with Poisson "
            f"arrivals, its TTFT scaled by {self.ratio[0]:.2f} [{self.ratio[1]:.2f}, {self.ratio[2]:.2f}] "
            f"(what one open-loop step measured at {self.at:.3g} req/s over the model's there): its "
            f"percentile meets the SLO at {self.rate:.3g} req/s, at {self.low:.3g}-{self.high:.3g} across "
            f"the step's interval"
        )


def calibrate(points: Sequence[ModelPoint], at: ModelPoint, ttft: tuple[float, float, float], tpot: float,
              bounds: tuple[float, float]) -> ModelKnee:  # fmt: skip
    """The model knee on `points` scaled to one open-loop step at `at.rate`, which measured TTFT
    (value, low, high: its percentile with the batch-means interval) and TPOT at the percentile.

    The scale is multiplicative: near the knee TTFT is mostly the wait for a slot, which grows with
    whatever the model lacks in proportion, not by a fixed delay. TPOT is an average over a
    request's tokens, its percentile steady within a short window: its point estimate scales."""
    ratio = tuple(value / at.ttft if at.ttft > 0 else 1.0 for value in ttft)
    tpot_ratio = tpot / at.tpot if at.tpot > 0 else 1.0
    # A larger TTFT ratio (the interval's high end) moves the knee down: the band's lower end.
    return ModelKnee(
        rate=crossing(points, (ratio[0], tpot_ratio), bounds),
        low=crossing(points, (ratio[2], tpot_ratio), bounds),
        high=crossing(points, (ratio[1], tpot_ratio), bounds),
        ratio=(ratio[0], ratio[1], ratio[2]),
        at=at.rate,
    )
