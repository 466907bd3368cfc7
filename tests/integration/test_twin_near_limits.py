"""The twin of the real 2,048-output-token profile against the server sweep recorded beside it.

vLLM 0.26.0 (8B-shaped, 32 slots, 4,096 blocks, 1,024-token prompts; docs/benchmarks.md, "The twin
near its limits") ran 240 s open-loop steps from idle: it held 1.6 req/s (TTFT p90 65 ms, 6
preemptions) and failed 1.8 (9.8 s, 244 preemptions), 2.0 and 2.2. The twin of the profile measured
on that engine (`long-2048/s0/profile.json`, whose budget ran out before any open-loop step) runs the
same steps here on virtual time (the engine alone: its clock is virtual, so a seed gives one result
on any machine), five seeds of Poisson arrivals per level.

**The bound.** The server's steps are one draw each, 7.7x under the SLO at 1.6 and 20x over it at
1.8, so the twin must land on the same side in the typical draw: the median of the seeds' TTFT p90.
Each level runs twice: at its nominal rate, and at the rate the recorded step realised (its offered
requests over 240 s: 379 at 1.6, 1.58 req/s; 479 at 1.8, 2.0 req/s, an unlucky draw the engine met).
"""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

import pytest

from lab.emulator.engine import Engine
from lab.emulator.params import EngineParams
from lab.profile.schema import load
from lab.profile.twin.params import twin_params

RECORD = Path(__file__).parents[2] / "runs/2026-11-26-real-vllm-0.26.0-h200/gpu-bound-8b/long-2048"
SLO_TTFT = 0.5
SEEDS = range(5)
# What HTTP and streaming add to the server's TTFT on the client (the profile's own cross-check read
# 5.9 ms): the sweep's SLO is the client's.
CLIENT_SECONDS = 0.006


def _recorded() -> dict[float, dict[str, float]]:
    steps = [
        json.loads(line) for name in ("sweep-a.jsonl", "sweep-b.jsonl") for line in (RECORD / name).open()
    ]
    return {step["rate"]: step for step in steps}


@pytest.fixture(scope="module")
def twin() -> EngineParams:
    return twin_params(load(RECORD / "s0/profile.json"))


def ttft_p90(params: EngineParams, rate: float, seconds: float, seed: int) -> float:
    """The client's TTFT p90 of every request of one step of Poisson arrivals, from an idle engine."""
    engine, draw = Engine(params, seed=seed), random.Random(seed)
    requests, at = [], draw.expovariate(rate)
    while at < seconds:
        requests.append(engine.submit(1024, 2048, ignore_eos=True, at=at))
        at += draw.expovariate(rate)
    engine.run_until(seconds * 20)
    ttfts = sorted(r.ttft for r in requests if r.ttft is not None)
    assert len(ttfts) == len(requests), "every request of the step should have finished"
    return statistics.quantiles(ttfts, n=10)[-1] + CLIENT_SECONDS


@pytest.mark.parametrize("level", [1.6, 1.8])
@pytest.mark.parametrize("realised", [False, True], ids=["nominal", "realised"])
def test_the_twin_holds_and_fails_where_vllm_did(twin: EngineParams, level: float, realised: bool) -> None:
    step = _recorded()[level]
    held = step["client_ttft_p90"] <= SLO_TTFT
    assert held == (level == 1.6), "the record: vLLM held 1.6 req/s and failed 1.8"
    rate = step["offered"] / step["step_seconds"] if realised else level
    p90s = [ttft_p90(twin, rate, step["step_seconds"], seed) for seed in SEEDS]
    median = statistics.median(p90s)
    assert (median <= SLO_TTFT) == held, (
        f"at {rate:.3g} req/s the twin's TTFT p90 over seeds "
        f"{[round(p, 3) for p in p90s]} (median {median:.3f} s) "
        f"lands on the other side of {SLO_TTFT} s from vLLM's {step['client_ttft_p90']:.3f} s"
    )
