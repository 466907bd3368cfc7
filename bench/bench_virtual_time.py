"""The demo on virtual time against the wall clock: wall and CPU seconds, and whether runs repeat.

Runs `vllm-autoscale demo --profile smoke` alternately with `--real-time` (the baseline: the loop on
the wall clock at the profile's 15x) and on virtual time (the default), `--rounds` times each, same
seed, and prints per mode the wall seconds, the child's CPU seconds, the ratio to the baseline of the
same round, and how many runs gave the first run's summary exactly.

    .venv/bin/python bench/bench_virtual_time.py [--rounds 3] [--profile smoke]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_MODES = {"wall clock (--real-time)": ["--real-time"], "virtual time": []}


def _run(profile: str, extra: list[str], out: Path) -> tuple[float, float, str]:
    """One demo run: wall seconds, the child's CPU seconds, its summary.json."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    command = [
        sys.executable,
        "-m",
        "adapter",
        "demo",
        "--profile",
        profile,
        "--plain",
        "--out",
        str(out),
        *extra,
    ]
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True, timeout=900)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, (out / "summary.json").read_text(encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", default="smoke")
    args = parser.parse_args()
    walls: dict[str, list[float]] = {mode: [] for mode in _MODES}
    cpus: dict[str, list[float]] = {mode: [] for mode in _MODES}
    summaries: dict[str, list[str]] = {mode: [] for mode in _MODES}
    with tempfile.TemporaryDirectory() as scratch:
        for i in range(args.rounds):
            for mode, extra in _MODES.items():
                wall, cpu, summary = _run(args.profile, extra, Path(scratch) / f"{i}-{len(extra)}")
                walls[mode].append(wall)
                cpus[mode].append(cpu)
                summaries[mode].append(summary)
    baseline = "wall clock (--real-time)"
    print(f"{'mode':<26} {'wall s':>8} {'vs base':>8} {'CPU s':>7} {'same summary as run 1':>22}")
    for mode in _MODES:
        ratios = [w / b for w, b in zip(walls[mode], walls[baseline], strict=True)]
        same = sum(s == summaries[mode][0] for s in summaries[mode])
        print(
            f"{mode:<26} {statistics.median(walls[mode]):>8.1f} {statistics.median(ratios):>7.2f}x "
            f"{statistics.median(cpus[mode]):>7.1f} {same:>18} of {len(summaries[mode])}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
