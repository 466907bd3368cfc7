"""The band of a recorded rehearsal, predicted again with today's model: after a change to the
backtest, a GPU day is judged again without the GPU (the live outcome is what it was; only the band
moves). Give the run's folder and the `rehearse` flags it ran with that shape the prediction (the
profile, the load, the HPA's); the engine, the GPUs, the measured cold start and the run's length
come from its record.

    python bench/rehearsal_band.py runs/2026-11-28-ramp-h200x4 -- \
        --profile examples/kv-s0-profile.json --trace traces/ramp-day.csv --downscale-stabilization 120

Prints the live outcome beside the band's median and range, and whether each is inside: the
rehearsal report's own lines (`lab.rehearsal.report.band_lines`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from lab.backtest.inputs.profile_calibration import from_profile
from lab.demo.summary import Summary
from lab.profile.schema import load
from lab.rehearsal import prediction, report
from lab.rehearsal.cli import add_arguments, load_from, settings_from
from lab.slo import Slo


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
    history = prediction.planned_history(traffic, record["summary"]["duration"], settings.start_replicas)
    band = prediction.predict_band(
        settings.policy,
        calibration,
        history,
        settings.slo,
        record["prediction"]["cold_start"],
        seeds=args.seeds,
    )
    live = Summary(**{**record["summary"], "slo": Slo(**record["summary"]["slo"]), "comparison": None})
    print(f"{args.run}: {settings.policy.describe()}")
    print("\n".join(report.band_lines(live, band)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
