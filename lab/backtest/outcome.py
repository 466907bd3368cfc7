"""A run reduced to the numbers a capacity planner compares: SLO attainment, latency, cost, churn.

Attainment counts every request that arrived and was served or refused: a refused request misses
both objectives. Requests still in flight when the range ends are reported, not judged. TTFT
percentiles are over served requests, from the fleet model's waits (unloaded TTFT + ticks waited).
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


def _percentile(waits: dict[int, float], q: float, base: float, dt: float) -> float | None:
    total = sum(waits.values())
    if total <= 0:
        return None
    running = 0.0
    for wait in sorted(waits):
        running += waits[wait]
        if running >= q * total - 1e-9:
            return base + wait * dt
    return base + max(waits) * dt


def outcome(run: Run, model: ServiceModel, slo: Slo, *, gpus_per_replica: float = 1.0) -> Scorecard:
    """The table row of `run` (whose fleet ran on `model`)."""
    tally = run.tally
    judged = tally.served + tally.dropped
    dt = run.seconds / run.ticks if run.ticks else 1.0

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
        ttft_p90=_percentile(tally.waits, 0.9, model.ttft_base, dt),
        ttft_p99=_percentile(tally.waits, 0.99, model.ttft_base, dt),
        gpu_hours=tally.replica_seconds * gpus_per_replica / 3600,
        replica_minutes=tally.replica_seconds / 60,
        scale_events=run.scale_events,
        oscillations=run.oscillations,
        peak_replicas=run.peak_replicas,
        dropped=tally.dropped,
        in_flight_end=run.waiting_end,
        seconds=run.seconds,
    )
