"""Engine presets for the demo and the throughput of one replica, measured in simulated time.

The emulator's defaults are calibrated on a fast 1B model (~30 requests/s per replica, ~400 engine
steps per emulated second). Played at 10x on a laptop with a handful of replicas that costs most of
a CPU core, so the demo defaults to a slower, larger-model preset with the same shape (the KV cache
binds before `max_num_seqs`, TPOT rises ~1.5x from an empty to a full batch), at about 1.3
requests/s per replica and a few percent of a core. `--engine calibrated` plays the 1B calibration.

Profiles state load in multiples of one replica's capacity; `measure_capacity` finds that number by
running one engine, without a clock (`lab.simulated_serving.serve`), on a backlog of requests
shaped like the load.
"""

from __future__ import annotations

from typing import Final

from lab.demo.loadgen import RequestShape, Scenario, Stage, arrivals
from lab.emulator import Engine, EngineParams
from lab.simulated_serving import serve

ENGINES: Final[dict[str, EngineParams]] = {
    # 16 slots, a KV pool that holds ~14 average requests, 20 ms step + 0.8 ms per sequence
    # (TPOT ~25 ms alone, ~38 ms in a full batch), 0.1 ms per prefill token (TTFT ~170 ms unloaded).
    "demo": EngineParams(
        max_num_seqs=16,
        num_gpu_blocks=1200,
        step_base_seconds=0.020,
        step_per_seq_seconds=0.0008,
        step_per_prefill_token_seconds=0.0001,
    ),
    "calibrated": EngineParams(),
}

# Enough queued work to keep the batch full for many request lifetimes, so the warm-up and the final
# drain are small next to the steady middle that is measured.
_BACKLOG_PER_SLOT: Final = 12


def measure_capacity(params: EngineParams, shape: RequestShape | None = None, *, seed: int = 0) -> float:
    """Completed requests per emulated second of one saturated engine (the middle 80 % of a backlog).

    Deterministic for a seed; the backlog has the load's request shapes (prefix sharing included
    only through lengths, which the throughput does not depend on).
    """
    count = params.max_num_seqs * _BACKLOG_PER_SLOT
    backlog = Scenario("backlog", (Stage("backlog", 1.0, 1.0),), "")
    # All at once: the backlog is queued before the first step, whatever times the draw gave them.
    drawn = arrivals(backlog, float(count), seed=seed, shape=shape)
    served = serve([Engine(params, seed=seed)], ((0.0, a.prompt_tokens, a.max_tokens) for a in drawn))
    times = sorted(r.finished for r in served if r.finished is not None)
    low, high = times[len(times) // 10], times[(len(times) * 9) // 10]
    if high <= low:
        raise ValueError("unable to measure capacity: the backlog finished at once")
    return ((len(times) * 9) // 10 - len(times) // 10) / (high - low)
