"""A run reduced to the numbers a capacity planner compares: SLO attainment, latency, cost, churn.

Attainment counts every request that arrived and was served or refused: a refused request misses
both objectives. Requests still in flight when the range ends are reported, not judged. TTFT
percentiles are over served requests, from the fleet model's TTFTs (the batch's TTFT + ticks waited).
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.backtest.calibration import ServiceModel
from lab.backtest.simulate import Run
from lab.slo import Slo


@dataclass(frozen=True)
class Scorecard:
    """One row of the table: a run reduced to the numbers a capacity planner compares."""

    name: str
    description: str
    kind: str
    capacity: float
    requests: float
    slo_attainment: float
    ttft_attainment: float
    tpot_attainment: float
    ttft_p90: float | None
    ttft_p99: float | None
    gpu_hours: float
    replica_minutes: float
    scale_events: int
    oscillations: int
    peak_replicas: int
    dropped: float
    in_flight_end: float
    seconds: float


def ttft_percentile(ttfts: dict[int, float], q: float) -> float | None:
    """The q-quantile of TTFT in seconds from `Tally.ttfts` (tenths of a millisecond -> requests)."""
    total = sum(ttfts.values())
    if total <= 0:
        return None
    running = 0.0
    for key in sorted(ttfts):
        running += ttfts[key]
        if running >= q * total - 1e-9:
            return key / 10_000
    return max(ttfts) / 10_000


def outcome(run: Run, model: ServiceModel, slo: Slo, *, gpus_per_replica: float = 1.0) -> Scorecard:
    """The table row of `run` (whose fleet ran on `model`)."""
    tally = run.tally
    judged = tally.served + tally.dropped

    def share(good: float) -> float:
        return good / judged if judged > 0 else 1.0

    return Scorecard(
        name=run.policy.name,
        description=run.policy.describe(),
        kind="baseline" if run.policy.baseline else "candidate",
        capacity=run.capacity,
        requests=run.arrived,
        slo_attainment=share(tally.both_good),
        ttft_attainment=share(tally.ttft_good),
        tpot_attainment=share(tally.tpot_good),
        ttft_p90=ttft_percentile(tally.ttfts, 0.9),
        ttft_p99=ttft_percentile(tally.ttfts, 0.99),
        gpu_hours=tally.replica_seconds * gpus_per_replica / 3600,
        replica_minutes=tally.replica_seconds / 60,
        scale_events=run.scale_events,
        oscillations=run.oscillations,
        peak_replicas=run.peak_replicas,
        dropped=tally.dropped,
        in_flight_end=run.waiting_end,
        seconds=run.seconds,
    )
