"""Five replays of the two-day diurnal reference trace, and a digest of everything they produced.

What `tests/lab/backtest/test_reference_traces.py` and a decision's band spend their CPU on: the
fleet model's tick and the HPA model, per second of traffic. The five replays cover the fleet's
paths: seeded (whole requests, sampled gauges) and fluid, the Service and the least-in-flight
router, an HPA on in-flight requests, the anticipating forecast, the utilisation HPA and a fixed
fleet, each with its timeline. The digest is a SHA-256 of the runs' `repr` and timelines: an
optimisation of the model must leave it unchanged.

Compare a change with its base as one paired run (farm-bench alternates the two and takes the ratio
pair by pair, so the machine's drift cancels), the base checked out beside the tree:

    git worktree add /tmp/base HEAD~1
    farm-bench -n 5 --timeout 300 --vs "env PYTHONPATH=/tmp/base .venv/bin/python bench/bench_replays.py" \
        -- .venv/bin/python bench/bench_replays.py

Results: docs/benchmarks/backtest.md, "The fleet's tick, unrolled".
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from lab.backtest.calibration import given
from lab.backtest.fleet import Router
from lab.backtest.inputs.trace_file import read_trace
from lab.backtest.policy import SweepSettings, builtin_sweep, default_max_replicas
from lab.backtest.simulate import simulate
from lab.slo import Slo

TRACE = Path(__file__).resolve().parents[1] / "traces" / "diurnal-2d.csv"
CAPACITY = 1.44
#: (policy, seed or None for the fluid replay, router)
REPLAYS: tuple[tuple[str, int | None, Router], ...] = (
    ("anticipate", 1, "service"),
    ("inflight-4", 2, "service"),
    ("gpu-util-80", None, "service"),
    ("inflight-6", 3, "least-inflight"),
    ("fixed-peak", 1, "service"),
)


def main() -> None:
    history = read_trace(TRACE)
    calibration = given(CAPACITY)
    knee, _ = calibration.knee_rate(0.05)
    peak = history.peak_rate()
    capacity = calibration.model.capacity
    settings = SweepSettings(max_replicas=default_max_replicas(peak, capacity), knee_rate=knee)
    policies = {p.name: p for p in builtin_sweep(calibration.model, settings, peak, calibration.saturation)}
    slo = Slo()  # the backtest's default objectives
    digest = hashlib.sha256()
    started = time.process_time()
    for name, seed, router in REPLAYS:
        run = simulate(
            policies[name],
            calibration.model,
            history,
            slo,
            planned_capacity=capacity,
            seed=seed,
            router=router,
            timeline=True,
        )
        line, run.timeline = run.timeline, None
        assert line is not None
        digest.update(repr(run).encode())
        digest.update(repr((line.pods, line.served_at)).encode())
    print(f"{len(REPLAYS)} replays of {TRACE.name}: {time.process_time() - started:.2f} s of CPU")
    print(f"digest {digest.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
