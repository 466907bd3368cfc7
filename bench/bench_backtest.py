"""The backtest's speed: simulated seconds per wall second, per policy, on a one-day trace at 1 s.

The trace is a made day (seeded): a diurnal wave between 0.5x and 3.5x of one replica's capacity,
Poisson noise per second, and two bursts. Every policy of the built-in sweep and its baselines runs
through the fleet model and the HPA model (`lab.hpa.HorizontalController`, synced every 15 s) at
the capacity estimate, once each, timed with `time.perf_counter` (wall) and `time.process_time`
(CPU, which other work on the machine does not inflate); `evaluate` runs each three times
(the capacity band), so a day × 20 policies takes 3 × 20 × 86,400 / speed seconds.

    .venv/bin/python bench/bench_backtest.py [--hours 24] [--capacity 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time

from lab.backtest.calibration import given
from lab.backtest.history import History
from lab.backtest.policy import SweepSettings, builtin_sweep, default_max_replicas
from lab.backtest.simulate import Slo, simulate

GOAL = 20_000.0


def day_trace(hours: float, capacity: float, seed: int = 0) -> History:
    """Arrivals per second: a diurnal wave, two bursts, Poisson-like noise (normal approximation)."""
    rng = random.Random(seed)
    seconds = round(hours * 3600)
    arrivals = []
    for t in range(seconds):
        load = 2.0 - 1.5 * math.cos(2 * math.pi * t / 86400)
        if 30000 <= t % 86400 < 30600 or 61000 <= t % 86400 < 61300:
            load += 2.0
        rate = load * capacity
        arrivals.append(max(0.0, rng.gauss(rate, math.sqrt(rate))))
    return History(step=1.0, arrivals=tuple(arrivals), source=f"made day ({hours:g} h, seed {seed})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--capacity", type=float, default=30.0, help="req/s per replica")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    history = day_trace(args.hours, args.capacity)
    model = given(args.capacity).model
    peak = history.peak_rate()
    policies = builtin_sweep(
        model, SweepSettings(max_replicas=default_max_replicas(peak, args.capacity)), peak
    )
    rows = []
    for policy in policies:
        started, cpu_started = time.perf_counter(), time.process_time()
        run = simulate(policy, model, history, Slo())
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        judged = run.tally.served + run.tally.dropped
        rows.append(
            {
                "policy": policy.name,
                "wall_seconds": round(wall, 3),
                "speed": round(run.seconds / wall),
                "cpu_speed": round(run.seconds / cpu),
                "slo_attainment": round(run.tally.both_good / judged, 4) if judged else None,
                "scale_events": run.scale_events,
            }
        )
    speeds = [r["speed"] for r in rows]
    summary = {
        "trace_seconds": history.duration,
        "requests": round(history.requests),
        "policies": len(rows),
        "speed_min": min(speeds),
        "speed_median": statistics.median(speeds),
        "cpu_speed_min": min(r["cpu_speed"] for r in rows),
        "total_wall_seconds": round(sum(float(r["wall_seconds"]) for r in rows), 2),
        "goal": GOAL,
        "python": sys.version.split()[0],
    }
    if args.json:
        print(json.dumps({"summary": summary, "rows": rows}, indent=2))
    else:
        print(f"{history.source}: {summary['requests']} requests, {len(rows)} policies")
        print(
            f"{'policy':<16} {'wall s':>7} {'sim s / wall s':>15} {'sim s / CPU s':>14} {'SLO':>7} {'events':>7}"
        )
        for r in rows:
            print(f"{r['policy']:<16} {r['wall_seconds']:>7} {r['speed']:>15,} {r['cpu_speed']:>14,} "
                  f"{r['slo_attainment']!s:>7} {r['scale_events']:>7}")  # fmt: skip
        print(f"slowest {summary['speed_min']:,}x, median {summary['speed_median']:,}x (goal >= {GOAL:,.0f}x); "
              f"all policies once: {summary['total_wall_seconds']} s")  # fmt: skip
    return 0 if min(speeds) >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
