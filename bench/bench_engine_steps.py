"""CPU the emulated engine spends advancing time, in the demo's pattern: short `run_until` slices.

On virtual time the demo's runner catches each engine up every few emulated tens of milliseconds,
so most calls advance two or three decode steps over a batch of a few requests. This drives one
`Engine` that way (demo request shapes: prompts U[200, 1800] tokens, 30 % with a shared 512-token
prefix, `max_tokens` U[64, 512], `ignore_eos`) and prints the process CPU seconds per round and a
digest of the engine's results, so two trees can be compared for speed and for equal output:

    PYTHONPATH=. .venv/bin/python bench/bench_engine_steps.py [--rounds 5] [--seconds 1200]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import time

from lab.emulator.engine import Engine
from lab.emulator.params import EngineParams


def _run(seconds: float, rate: float, tick: float, seed: int) -> tuple[float, str]:
    """Drive one engine for `seconds` emulated seconds; its CPU seconds and a digest of its results."""
    engine = Engine(EngineParams(), seed=seed)
    rng = random.Random(seed)
    shared = list(range(512))
    requests = []
    arrival = rng.expovariate(rate)
    clock = 0.0
    started = time.process_time()
    while clock < seconds:
        clock += tick
        while arrival <= clock:
            length = rng.randint(200, 1800)
            base = rng.randrange(1 << 40)
            own = list(range(base, base + length))
            prompt = shared + own[512:] if rng.random() < 0.3 else own
            requests.append(engine.submit(prompt, rng.randint(64, 512), ignore_eos=True, at=arrival))
            arrival += rng.expovariate(rate)
        engine.run_until(clock)
    engine.run_until(engine.now + 600.0)
    cpu = time.process_time() - started
    times = [(r.first_token, r.last_token, r.num_output, r.num_preemptions) for r in requests]
    digest = hashlib.sha256(repr((times, engine.steps, engine.now)).encode()).hexdigest()[:16]
    return cpu, digest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1200.0, help="emulated seconds per round")
    parser.add_argument("--rate", type=float, default=0.5, help="arrivals per emulated second")
    parser.add_argument("--tick", type=float, default=0.06, help="emulated seconds per run_until call")
    args = parser.parse_args()
    cpus = []
    for round_ in range(args.rounds):
        cpu, digest = _run(args.seconds, args.rate, args.tick, seed=round_ % 2)
        cpus.append(cpu)
        print(f"round {round_}: {cpu:.3f} CPU s  digest {digest}")
    print(f"median {statistics.median(cpus):.3f} CPU s, min {min(cpus):.3f}")


if __name__ == "__main__":
    main()
