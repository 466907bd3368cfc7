"""Profile pieces made by hand for the tests: steps, knees, whole profiles."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from lab.emulator.params import EngineParams
from lab.load.server import Server
from lab.load.workload import Distribution, Workload
from lab.profile.schema import Knee, PercentileSlo, Profile, Step

SLO = PercentileSlo(ttft_seconds=0.5, tpot_seconds=0.05, percentile=0.9)


def step(
    rate: float,
    *,
    kind: Literal["rate", "concurrency"] = "rate",
    running: float = 1.0,
    waiting: float = 0.0,
    kv: float = 0.1,
    ttft: float = 0.1,
    tpot: float = 0.02,
    held: bool = True,
    stable: bool = True,
    server_tpot: float | None = None,
    server_ttft_mean: float | None = None,
    clients: int | None = None,
) -> Step:
    """A step with the given figures; latencies are the same at every percentile."""
    return Step(
        offered_rate=rate,
        achieved_rate=rate,
        concurrency=running + waiting,
        running=running,
        waiting=waiting,
        kv_usage=kv,
        preemptions=0.0,
        ttft_seconds={"p50": ttft, "p90": ttft, "p99": ttft, "mean": ttft},
        tpot_seconds={"p50": tpot, "p90": tpot, "p99": tpot, "mean": tpot},
        e2e_seconds={"p50": 1.0, "p90": 1.0},
        server_ttft_seconds=None,
        server_tpot_seconds=server_tpot,
        requests=50,
        queue_stable=stable,
        slo_met=held,
        kind=kind,
        server_ttft_mean_seconds=server_ttft_mean,
        clients=clients,
    )


def profile(steps: tuple[Step, ...], knee: Knee | None = None, **changes: object) -> Profile:
    """A complete profile of 128-in, 32-out requests around `steps`."""
    base = Profile(
        server=Server("0.33.0", "m", None, 2048, 16, 4096),
        workload=Workload(Distribution(128.0), Distribution(32.0)),
        slo=SLO,
        steps=steps,
        knee=knee,
        tpot_vs_batch=(),
        prefill_seconds_per_token=None,
        targets={},
        complete=knee is not None,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


# An engine the twin should recover: TPOT(b) = base + b * (per_seq + prefill * (P - 1) / O).
ENGINE = EngineParams(
    max_num_seqs=8,
    num_gpu_blocks=900,
    block_size=32,
    max_model_len=2048,
    step_base_seconds=0.012,
    step_per_seq_seconds=0.002,
    step_per_prefill_token_seconds=0.0001,
    frontend_seconds=0.02,
)


def profile_of_engine(params: EngineParams, max_num_seqs: int | None = None) -> Profile:
    """The profile a server of `params` would give (128-in, 32-out requests): its TPOT line at four
    batch sizes, its unloaded TTFT, its prefill cost per token, its KV cache (900 blocks of 32)."""
    prompt, output = 128.0, 32.0
    slope = params.step_per_seq_seconds + params.step_per_prefill_token_seconds * (prompt - 1) / output
    points = tuple((b, params.step_base_seconds + slope * b) for b in (1.0, 2.0, 4.0, 8.0))
    alone = (
        params.frontend_seconds
        + params.step_base_seconds
        + params.step_per_seq_seconds
        + params.step_per_prefill_token_seconds * (prompt - 1)
    )
    steps = (
        step(1.0, kind="concurrency", running=1.0, server_ttft_mean=alone),
        step(9.0, kind="concurrency", running=8.0),
    )
    return profile(
        steps,
        tpot_vs_batch=points,
        prefill_seconds_per_token=params.step_per_prefill_token_seconds,
        server=Server("0.33.0", "llama", max_num_seqs, 900, 32, 2048),
    )
