"""Overshoot while capacity loads: the default demo's spike, before and after the demand cap.

For each seed, `vllm-autoscale demo` plays the default profile twice, one run after the other (they
run in real scaled time and must not share the CPU): with the HPA on `vllm_requests_inflight`
AverageValue 12 (before), then on `inflight_within_demand` (after: in-flight capped at what the
arrival rate needs, `lab.demo.demand`). It prints, per run, the peak of `spec.replicas` during the
spike, SLO attainment and replica-minutes, against the spike's steady need: the fewest replicas that
serve the spike's rate within the SLO once nothing loads (`lab.demo.demand.steady_need`). Goal: peak
desired <= steady need + 1, SLO attainment no worse.

    .venv/bin/python bench/bench_overshoot.py [--seeds 0 1 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from lab.demo.capacity import ENGINES, measure_capacity
from lab.demo.demand import METRIC, steady_need
from lab.demo.report import CSV_NAME, SUMMARY_NAME, read_csv
from lab.demo.summary import Slo
from lab.loadgen import PROFILES

POLICIES = {"before": [], "after": ["--metric", METRIC]}


def run(policy: str, seed: int, out: Path) -> dict[str, float]:
    """One demo run; its spike's peak desired replicas, SLO attainment and replica-minutes."""
    where = out / f"{policy}-{seed}"
    command = [sys.executable, "-m", "adapter", "demo", "--plain", "--seed", str(seed), "--out", str(where)]
    subprocess.run([*command, *POLICIES[policy]], check=True, capture_output=True, text=True)
    summary = json.loads((where / SUMMARY_NAME).read_text())["summary"]
    start, end = PROFILES["default"].bounds("spike")
    ticks = read_csv(where / CSV_NAME)
    # The spike's overshoot shows up to a cold start after it ends (replicas asked for at its end).
    peak = max(t.desired for t in ticks if start <= t.t <= end + 60)
    return {"peak": peak, "slo": summary["slo_attainment"], "minutes": summary["replica_minutes"]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, help="keep each run's PNG, CSV and summary here")
    args = parser.parse_args()
    params = ENGINES["demo"]
    rate = PROFILES["default"].peak * measure_capacity(params)
    need = steady_need(params, rate, Slo())
    print(f"spike: {rate:.2f} req/s; steady need {need} replicas (goal: peak desired <= {need + 1})\n")
    out = args.out or Path(tempfile.mkdtemp(prefix="overshoot-"))
    rows = {policy: [run(policy, seed, out) for seed in args.seeds] for policy in POLICIES}
    print("| policy | seed | peak desired | SLO attainment | replica-minutes |")
    print("|---|---|---|---|---|")
    for policy, results in rows.items():
        for seed, r in zip(args.seeds, results, strict=True):
            print(f"| {policy} | {seed} | {r['peak']:.0f} | {r['slo']:.1%} | {r['minutes']:.1f} |")
        print(
            f"| **{policy}, mean** | | {statistics.mean(r['peak'] for r in results):.1f} "
            f"(max {max(r['peak'] for r in results):.0f}) | {statistics.mean(r['slo'] for r in results):.1%} "
            f"| {statistics.mean(r['minutes'] for r in results):.1f} |"
        )
    print(f"\nruns in {out}")


if __name__ == "__main__":
    main()
