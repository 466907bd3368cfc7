"""Overshoot while capacity loads: the default demo's spike, before and after the demand cap.

For each seed, `vllm-autoscale demo` plays the default profile twice, one run after the other (they
run in real scaled time and must not share the CPU): with the HPA on `vllm_requests_inflight`
AverageValue 12 (before), then on `inflight_within_demand` (after: in-flight capped at what the
arrival rate needs, `lab.demo.demand`). It prints, per run, the peak of `spec.replicas` during the
spike, SLO attainment and replica-minutes, against the spike's steady need: the fewest replicas that
serve the spike's rate within the SLO once nothing loads (`lab.demo.demand.steady_need`). Goal: peak
desired <= steady need + 1, SLO attainment no worse.

    .venv/bin/python bench/bench_overshoot.py [--seeds 0 1 2] [--out DIR]
        [--figure runs/2026-11-26-overshoot/overshoot.png]

`--figure` draws the first seed's two runs: desired and Ready replicas through the spike, against
the steady need.
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
from lab.demo.loadgen import SCENARIOS
from lab.demo.report import CSV_NAME, SUMMARY_NAME, read_csv
from lab.slo import Slo

POLICIES = {"before": [], "after": ["--metric", METRIC]}


def run(policy: str, seed: int, out: Path) -> dict[str, float]:
    """One demo run; its spike's peak desired replicas, SLO attainment and replica-minutes."""
    where = out / f"{policy}-{seed}"
    command = [sys.executable, "-m", "adapter", "demo", "--plain", "--seed", str(seed), "--out", str(where)]
    subprocess.run([*command, *POLICIES[policy]], check=True, capture_output=True, text=True)
    summary = json.loads((where / SUMMARY_NAME).read_text())["summary"]
    start, end = SCENARIOS["default"].bounds("spike")
    ticks = read_csv(where / CSV_NAME)
    # The spike's overshoot shows up to a cold start after it ends (replicas asked for at its end).
    peak = max(t.desired for t in ticks if start <= t.t <= end + 60)
    return {"peak": peak, "slo": summary["slo_attainment"], "minutes": summary["replica_minutes"]}


def figure(path: Path, out: Path, seed: int, need: int) -> None:
    """Desired and Ready replicas around the spike, before and after, with the steady need."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start, end = SCENARIOS["default"].bounds("spike")
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), sharey=True)
    for ax, policy in zip(axes, POLICIES, strict=True):
        where = out / f"{policy}-{seed}"
        ticks = [t for t in read_csv(where / CSV_NAME) if start - 120 <= t.t <= end + 240]
        summary = json.loads((where / SUMMARY_NAME).read_text())["summary"]
        times = [t.t for t in ticks]
        ax.axvspan(start, end, color="0.92", label="spike")
        ax.step(times, [t.desired for t in ticks], where="post", color="tab:blue", lw=2, label="desired")
        ax.step(times, [t.ready for t in ticks], where="post", color="tab:green", label="Ready")
        ax.axhline(need, color="black", ls=":", label=f"steady need {need}")
        ax.axhline(need + 1, color="tab:red", ls="--", lw=1, label="goal: need + 1")
        metric = (
            "vllm_requests_inflight AverageValue 12" if policy == "before" else f"{METRIC} AverageValue 8"
        )
        ax.set_title(
            f"{policy}: {metric}\nSLO {summary['slo_attainment']:.1%}, "
            f"{summary['replica_minutes']:.1f} replica-minutes",
            fontsize=9,
        )
        ax.set_xlabel("emulated seconds")
    axes[0].set_ylabel("replicas")
    axes[1].legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, help="keep each run's PNG, CSV and summary here")
    parser.add_argument("--figure", type=Path, help="draw the first seed's runs into this PNG")
    args = parser.parse_args()
    params = ENGINES["demo"]
    rate = SCENARIOS["default"].peak * measure_capacity(params)
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
    if args.figure:
        figure(args.figure, out, args.seeds[0], need)


if __name__ == "__main__":
    main()
