"""One emulated replica's knee for the SLO: the highest Poisson rate it serves with the SLO held.

A profile of a real server measures this (`lab.profile.knee`); for the demo's engine it is measured
the same way in simulated time, without a clock: one replica fed Poisson arrivals of the demo's
request shapes at rising shares of its capacity (`lab.demo.demand.steady_attainment`, served by
`lab.simulated_serving.serve`, the loop the profile's model knee runs too). A saturated
backlog's throughput (`capacity.measure_capacity`) is not it: with Poisson arrivals and a KV cache
that binds before the batch is full, queues form well below saturation (half of capacity already
costs a percent of requests their TTFT on this engine).
"""

from __future__ import annotations

from typing import Final

from lab.demo.demand import steady_attainment
from lab.emulator import EngineParams
from lab.slo import Slo

#: Shares of capacity tried, lowest first; the knee is the last that holds (coarse: the decision
#: tries headroom below it anyway).
SHARES: Final = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)
#: Seeds whose runs are pooled at each share: one seed's arrivals decide too much on their own.
SEEDS: Final = (0, 1)
#: Emulated seconds per run (the first sixth is warm-up).
DURATION: Final = 600.0


def engine_knee(params: EngineParams, capacity: float, slo: Slo, goal: float) -> float:
    """Requests per second one replica takes with at least `goal` of requests within `slo`: the
    highest share of `capacity` in `SHARES` that holds on the pooled seeds (the lowest if none does)."""
    knee = SHARES[0]
    for share in SHARES:
        runs = [steady_attainment(params, 1, share * capacity, slo, seed=s, duration=DURATION) for s in SEEDS]
        if sum(runs) / len(runs) < goal:
            break
        knee = share
    return knee * capacity
