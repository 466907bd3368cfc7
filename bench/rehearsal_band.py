"""The band of a recorded rehearsal, predicted again with today's model: after a change to the
backtest, a GPU day is judged again without the GPU (the live outcome is what it was; only the band
moves). Give the run's folder and the `rehearse` flags it ran with that shape the prediction (the
profile, the load, the HPA's); the engine, the GPUs, the measured cold start and the run's length
come from its record.

    python bench/rehearsal_band.py runs/2026-11-28-ramp-h200x4 -- \
        --profile examples/kv-s0-profile.json --trace traces/ramp-day.csv --downscale-stabilization 120

Prints the live outcome beside the band's median and range, and whether each is inside, as the
rehearsal's report does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from lab.backtest.inputs.profile_calibration import from_profile
from lab.profile.schema import load
from lab.rehearsal import prediction
from lab.rehearsal.cli import add_arguments, load_from, settings_from


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="the rehearsal's --out folder (its rehearsal.json)")
    parser.add_argument("--seeds", type=int, default=prediction.BAND_SEEDS)
    parser.add_argument("rehearse", nargs=argparse.REMAINDER, help="-- then the rehearse flags")
    args = parser.parse_args(argv)
    flags = args.rehearse[1:] if args.rehearse[:1] == ["--"] else args.rehearse
    record = json.loads((args.run / "rehearsal.json").read_text(encoding="utf-8"))
    rehearse = argparse.ArgumentParser(prog="rehearse")
    add_arguments(rehearse)
    given = rehearse.parse_args(["--engine", record["settings"]["engine"], *flags])
    profile = load(given.profile)
    calibration = from_profile(profile, str(given.profile))
    settings = settings_from(given, profile, tuple(record["settings"]["gpus"]))
    traffic = asyncio.run(load_from(given, calibration.capacity.value))
    summary = record["summary"]
    history = prediction.planned_history(traffic, summary["duration"], settings.start_replicas)
    band = prediction.predict_band(
        settings.policy,
        calibration,
        history,
        settings.slo,
        record["prediction"]["cold_start"],
        seeds=args.seeds,
    ).band
    print(f"{args.run}: {band.seeds} seeds, {settings.policy.describe()}")
    for name, live, spread in (
        ("slo_attainment", summary["slo_attainment"], band.slo),
        ("replica_minutes", summary["replica_minutes"], band.replica_minutes),
        ("ttft_p90", summary["ttft_p90"], band.ttft_p90),
    ):
        if spread is None:
            continue
        inside = spread.holds(live)
        print(
            f"  {name:16} live {live:8.4g}  median {spread.median:8.4g}  "
            f"range {spread.low:.4g}-{spread.high:.4g}"
            f"  {'inside' if inside else 'OUTSIDE'}  (median - live {spread.median - live:+.3g})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
