"""Write the backtest's reference traces (traces/) from fixed seeds: the same bytes on every run.

* `diurnal-2d.csv`: two days, one row a minute, Poisson counts around a daily wave between 0.4 and
  3 req/s (peak at 14:00, trough at 02:00) with a weekday-to-weekday difference of 10 %; the trace of
  issue #20 (1.44 req/s per replica, 60 s cold start).
* `bursty-6h.csv`: six hours, one row per 10 s, Poisson counts around 1.5 req/s with a burst every
  20-40 minutes: 2-4x for 3-8 minutes, each rising over 60-120 s (a marketing push, a batch client);
  some bursts rise faster than one cold start plus a sync period, which no signal announces in time.

The designed days the GPU recipe rehearses (issue 38, `scripts/gpu/day.sh`) are expected counts per
10 s, not draws: the rehearsal draws each day's arrivals from its own seed.

* `drop-jump-day.csv`: the KV-bound 8B engine: 3 req/s, a ramp from 3.5 by 0.99 req/s every 10 s to
  13.4 (80 % of two replicas' knee), 13.9 for a minute, a drop to 4 for 2.5 minutes that lets the fleet
  scale down, then a jump to 11 (95 % of one replica's saturated throughput) for 2 minutes (written by
  hand first; the pieces below give it byte for byte).

* `ramp-day.csv`: the KV-bound 8B engine (examples/kv-s0-profile.json: knee 8.67 req/s, saturated
  11.56): 1 req/s for a minute, a ramp over 4.5 minutes to 15 req/s (87 % of two replicas' knee), held
  90 s, down to 3 req/s in a minute, held 2.5 minutes so the fleet scales down inside the load.
* `long-step-day.csv`: the 8B engine with 2,048-token outputs (examples/long-2048-profile.json:
  saturated 1.86 req/s): 0.5 req/s, a step with no ramp to 1.7 (91 % of one replica's saturated
  throughput, above the 1.6 vLLM held for 240 s), then to 2.8 (75 % of two), then 0.5 for 3 minutes.

The demo's default day (`demo-default.csv`) is a `vllm-autoscale demo` run's CSV and the real vLLM
capture (`vllm-0.26.0-stages.csv`) is a copy of `shared/data/vllm-0.26.0/load-stages.csv`; traces/
README.md says how each was made.

    python bench/reference_traces.py [--out traces]
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path


def _poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw (Knuth's product method below 30, a rounded normal above)."""
    if mean <= 0:
        return 0
    if mean > 30:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, product, count = math.exp(-mean), rng.random(), 0
    while product > limit:
        product *= rng.random()
        count += 1
    return count


def diurnal(seed: int = 20) -> list[tuple[int, int]]:
    """Two days at one row a minute: (second, arrivals in that minute)."""
    rng = random.Random(seed)
    rows = []
    for minute in range(2 * 24 * 60):
        day, hour = divmod(minute / 60, 24)
        # Cosine wave: trough 0.4 req/s at 02:00, peak 3 req/s at 14:00; the second day 10 % lighter.
        wave = 0.5 - 0.5 * math.cos(2 * math.pi * (hour - 2) / 24)
        rate = (0.4 + 2.6 * wave) * (1.0 if day < 1 else 0.9)
        rows.append((minute * 60, _poisson(rng, rate * 60)))
    return rows


def bursty(seed: int = 21) -> list[tuple[int, int]]:
    """Six hours at one row per 10 s: (second, arrivals in those 10 s)."""
    rng = random.Random(seed)
    step, horizon = 10, 6 * 3600
    bursts = []
    t = rng.uniform(600, 1800)
    while t < horizon - 600:
        bursts.append((t, rng.uniform(60, 120), rng.uniform(180, 480), rng.uniform(2.0, 4.0)))
        t += rng.uniform(1200, 2400)
    rows = []
    for second in range(0, horizon, step):
        factor = 1.0
        for start, rise, hold, height in bursts:
            if start <= second < start + rise:
                factor = max(factor, 1 + (height - 1) * (second - start) / rise)
            elif start + rise <= second < start + rise + hold:
                factor = max(factor, height)
        rows.append((second, _poisson(rng, 1.5 * factor * step)))
    return rows


#: (from, until, rate at from, rate at until): requests per second, linear in between
Piece = tuple[int, int, float, float]
DESIGNED_DAYS: dict[str, list[Piece]] = {
    "drop-jump-day.csv": [
        (0, 40, 3, 3),
        (40, 150, 3.5, 14.39),
        (150, 210, 13.9, 13.9),
        (210, 360, 4, 4),
        (360, 480, 11, 11),
    ],
    "ramp-day.csv": [
        (0, 60, 1, 1),
        (60, 330, 1, 15),
        (330, 420, 15, 15),
        (420, 480, 15, 3),
        (480, 630, 3, 3),
    ],
    "long-step-day.csv": [(0, 90, 0.5, 0.5), (90, 300, 1.7, 1.7), (300, 420, 2.8, 2.8), (420, 600, 0.5, 0.5)],
}


def designed(pieces: list[Piece], step: int = 10) -> list[tuple[int, float]]:
    """Expected arrivals per `step` seconds along piecewise-linear rates."""
    rows = []
    for start, until, first, last in pieces:
        for t in range(start, until, step):
            rows.append((t, round((first + (last - first) * (t - start) / (until - start)) * step, 1)))
    return rows


def write(path: Path, rows: list[tuple[int, int]] | list[tuple[int, float]]) -> None:
    """A `time,arrivals` trace (lab/backtest/inputs/trace_file.py)."""
    lines = ["time,arrivals", *(f"{t},{a}" for t, a in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("traces"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    write(args.out / "diurnal-2d.csv", diurnal())
    write(args.out / "bursty-6h.csv", bursty())
    for name, pieces in DESIGNED_DAYS.items():
        write(args.out / name, designed(pieces))


if __name__ == "__main__":
    main()
