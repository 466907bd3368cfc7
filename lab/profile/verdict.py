"""A step's verdict from its window's statistics, each with an interval: held, failed, or undecided.

Requests near a replica's knee are not independent draws: a Poisson burst fills the batch slots and
every request behind it waits, so misses come in runs and a window's p90 swings with how many bursts
it caught. The intervals here are therefore **batch means**: the window is cut into `BLOCKS` blocks
by send time, a statistic is computed per block, and the spread of the blocks (Student's t on
`BLOCKS - 1` degrees of freedom) bounds the window's value. Blocks several seconds long absorb most
of the correlation between neighbouring requests, which an interval built from the request count alone
would ignore (it would be several times too narrow).

* **Latency**: the share of requests whose TTFT (TPOT) exceeds the SLO. The percentile holds while
  that share is at most `1 - percentile`; the verdict is decided when the share's interval lies on
  one side. The percentile's own interval, reported beside it, is the spread of the blocks'
  percentiles.
* **Queue trend**: the least-squares slope of the blocks' mean waiting gauge against time over the
  window's later half (a queue that climbed to a new level and stays there is not growing), tested
  against zero; growth counts when it is significant *and* material (at least `MATERIAL_GROWTH` of
  the offered rate piles up, and `MIN_GROWTH` requests over the stretch), stability when the
  interval excludes material growth.
* **Completion**: requests completed over requests offered; below `MIN_COMPLETION` the server is
  not keeping up, whatever its latencies say so far.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from lab.profile.schema import Estimate
from lab.stats import percentile, slope_interval, t95

BLOCKS: Final = 8
# A queue growing by 5 % of the arrivals is a backlog that never drains: material growth. Less is
# within what a queue near saturation wanders over a finite stretch (its relaxation time grows without
# bound there): at 90 % of a 3-slot engine's capacity a stretch of 134 s rose by 3 % of its arrivals,
# "significantly" by the blocks' spread. A rise of a few requests is the gauge's noise on a server of
# few slots, however small its rate.
MATERIAL_GROWTH: Final = 0.05
MIN_GROWTH: Final = 3.0
MIN_COMPLETION: Final = 0.9
Verdict = Literal["held", "failed", "undecided"]


def blocks_of(times: Sequence[float], start: float, end: float, blocks: int = BLOCKS) -> list[int]:
    """The block index in [0, blocks) of each time in [start, end] (a time past `end` joins the last)."""
    width = (end - start) / blocks if end > start else 1.0
    return [min(blocks - 1, max(0, int((t - start) / width))) for t in times]


def _interval(per_block: Sequence[float], value: float) -> Estimate:
    """`value` with the batch-means interval of the per-block values around it."""
    if len(per_block) < 2:
        return Estimate(value, -math.inf, math.inf)
    mean = sum(per_block) / len(per_block)
    spread = math.sqrt(sum((v - mean) ** 2 for v in per_block) / (len(per_block) - 1))
    half = t95(len(per_block) - 1) * spread / math.sqrt(len(per_block))
    return Estimate(value, value - half, value + half)


def miss_share(
    samples: Sequence[tuple[float, float]], bound: float, start: float, end: float
) -> Estimate | None:
    """The share of (send time, latency) samples above `bound`, with its interval; `None` without samples."""
    if not samples:
        return None
    index = blocks_of([t for t, _v in samples], start, end)
    sent = [0] * BLOCKS
    missed = [0] * BLOCKS
    for block, (_t, latency) in zip(index, samples, strict=True):
        sent[block] += 1
        missed[block] += latency > bound
    share = sum(missed) / len(samples)
    estimate = _interval([m / n for m, n in zip(missed, sent, strict=True) if n], share)
    return Estimate(share, max(0.0, estimate.low), min(1.0, estimate.high))


def percentile_interval(
    samples: Sequence[tuple[float, float]], q: float, start: float, end: float
) -> tuple[float, float] | None:
    """The q-quantile of (send time, latency) samples with its batch-means interval: the spread of
    the blocks' own q-quantiles around the window's; `None` without samples."""
    if not samples:
        return None
    index = blocks_of([t for t, _v in samples], start, end)
    per_block: dict[int, list[float]] = {}
    for block, (_t, latency) in zip(index, samples, strict=True):
        per_block.setdefault(block, []).append(latency)
    whole = percentile([v for _t, v in samples], q)
    quantiles = [percentile(v, q) for v in per_block.values()]
    if not math.isfinite(whole) or not all(math.isfinite(v) for v in quantiles):
        return (whole, math.inf)
    estimate = _interval(quantiles, whole)
    return (max(0.0, estimate.low), estimate.high)


def trend(samples: Sequence[tuple[float, float]], start: float, end: float) -> Estimate | None:
    """The slope per second of (time, value) samples, from their block means, with its interval."""
    index = blocks_of([t for t, _v in samples], start, end)
    sums: dict[int, list[float]] = {}
    for block, (_t, value) in zip(index, samples, strict=True):
        sums.setdefault(block, []).append(value)
    width = (end - start) / BLOCKS
    points = [(start + (b + 0.5) * width, sum(v) / len(v)) for b, v in sorted(sums.items())]
    fit = slope_interval(points)
    return None if fit is None else Estimate(*fit)


@dataclass(frozen=True)
class Evidence:
    """What a step's window showed, the inputs of its verdict."""

    ttft_miss: Estimate | None
    tpot_miss: Estimate | None
    waiting_slope: Estimate | None
    completion_ratio: float | None
    offered_rate: float
    allowed_miss: float
    """1 - the SLO's percentile: the share of requests that may miss."""
    errors: int = 0
    over_saturation: bool = False
    """The step offered more than a stable share of the saturated throughput."""
    trend_seconds: float = math.inf
    """How long the stretch is that the queue's trend was read over."""

    @property
    def material_growth(self) -> float:
        """The queue's growth per second that counts as a backlog (see `material_growth`)."""
        return material_growth(self.offered_rate, self.trend_seconds)


def material_growth(offered_rate: float, trend_seconds: float) -> float:
    """The queue's growth per second that counts as a backlog over a stretch of `trend_seconds` at
    `offered_rate` (`MATERIAL_GROWTH` of the arrivals, and `MIN_GROWTH` requests over the stretch)."""
    return max(MATERIAL_GROWTH * offered_rate, MIN_GROWTH / trend_seconds)


def _side(estimate: Estimate | None, bound: float) -> Verdict:
    """`held` if the interval lies at or below `bound`, `failed` above it, else `undecided`."""
    if estimate is None:
        return "undecided"
    if estimate.high <= bound:
        return "held"
    if estimate.low > bound:
        return "failed"
    return "undecided"


def judge(evidence: Evidence) -> Verdict:
    """The step's verdict: `failed` on any decided failure, `held` when every check is decided and holds."""
    material = evidence.material_growth
    checks = [
        _side(evidence.ttft_miss, evidence.allowed_miss),
        _side(evidence.tpot_miss, evidence.allowed_miss),
        _growth(evidence.waiting_slope, material),
    ]
    completion = evidence.completion_ratio
    if (
        evidence.errors
        or evidence.over_saturation
        or (completion is not None and completion < MIN_COMPLETION)
    ):
        return "failed"
    if "failed" in checks:
        return "failed"
    return "held" if all(c == "held" for c in checks) else "undecided"


def _growth(slope: Estimate | None, material: float) -> Verdict:
    """`failed` when the queue grows significantly and materially, `held` when material growth is
    excluded, else `undecided`. Without a trend (too few reads) the queue counts as stable: the
    latencies still decide."""
    if slope is None:
        return "held"
    if slope.low > 0 and slope.value > material:
        return "failed"
    if slope.high <= material:
        return "held"
    return "undecided"


def point_verdict(evidence: Evidence) -> Verdict:
    """The verdict of the point estimates alone, for a window that stayed undecided at its longest."""
    if judge(evidence) == "failed":
        return "failed"
    material = evidence.material_growth
    misses = [e.value for e in (evidence.ttft_miss, evidence.tpot_miss) if e is not None]
    growing = evidence.waiting_slope is not None and evidence.waiting_slope.value > material
    return "failed" if growing or any(m > evidence.allowed_miss for m in misses) else "held"


def growth_to_decide(checks: Sequence[tuple[Estimate | None, float]]) -> float:
    """By what factor a window must grow for each undecided (estimate, bound) check to decide, were
    its point estimate to stay where it is and its interval to narrow as one over the square root of
    the window (batch means of independent blocks): (half-width / distance to the bound)², the
    largest over the checks; 1 when every check is decided, infinite where a point sits on its bound.

    Near the knee a point estimate moves as the window grows, so this is a projection, not a promise:
    it tells a rate where the server flips (the percentile within its own noise of the bound, for as
    long as the profile could measure) from one that one more window decides."""
    factor = 1.0
    for estimate, bound in checks:
        if estimate is None or _side(estimate, bound) != "undecided":
            continue
        distance = abs(estimate.value - bound)
        if distance == 0:
            return math.inf
        factor = max(factor, ((estimate.high - estimate.low) / 2 / distance) ** 2)
    return factor
