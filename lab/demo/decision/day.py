"""The demo's day as the decision lab sees it: its traffic as a history, its engine as a service model.

The backtest recommends a policy for a user's recorded traffic and measured replica
(`vllm-autoscale backtest --trace ... --profile ...`); the demo asks it the same question about its
own day. The traffic is the requests the run will send (`loadgen.arrivals` for the run's profile,
capacity and seed: the same Poisson draws, counted per second, with their output lengths); the
replica is the run's engine, as a profile of it would measure it: its capacity with the spread that
measuring it on other backlogs gives (`lab.demo.validation.engine_capacity`'s seeds), its knee
for the SLO (`knee.engine_knee`), its batch and how a request's time grows with it (the engine's
step times), its unloaded TTFT and its mean output length.
"""

from __future__ import annotations

import math
from typing import Final

from lab.backtest.calibration import Calibration, Estimate, ServiceModel
from lab.backtest.history import History
from lab.demo.capacity import measure_capacity
from lab.demo.decision.knee import engine_knee
from lab.demo.loadgen import RequestShape, Scenario, arrivals
from lab.emulator import EngineParams
from lab.slo import Slo

#: Backlogs the capacity band is measured on (the demo's own figure is one of them).
CAPACITY_SEEDS: Final = range(8)
#: The grid the day is counted on: the backtest's default resolution.
STEP: Final = 1.0


def demo_day(profile: Scenario, capacity: float, seed: int, shape: RequestShape | None = None) -> History:
    """The requests the run sends, counted per `STEP`, with their mean output length (`max_tokens`:
    the demo's requests ignore EOS, so each produces all of it)."""
    steps = max(1, math.ceil(profile.duration / STEP))
    counts = [0.0] * steps
    tokens = [0.0] * steps
    for arrival in arrivals(profile, capacity, seed=seed, shape=shape):
        index = min(steps - 1, int(arrival.at / STEP))
        counts[index] += 1
        tokens[index] += arrival.max_tokens
    return History(
        step=STEP,
        arrivals=tuple(counts),
        source=f"the demo's day (profile {profile.name!r}, seed {seed})",
        output_tokens=tuple(t / c if c else math.nan for t, c in zip(tokens, counts, strict=True)),
    )


def engine_model(params: EngineParams, capacity: float, shape: RequestShape | None = None) -> ServiceModel:
    """The engine as the fleet model serves requests. A request's time grows with the batch as the
    engine's step does (`step_base + b x step_per_seq`), so `shape` is their ratio; the batch at
    saturation is what Little's law gives at `capacity` for the mean request of a full batch."""
    shape = shape or RequestShape()
    output = (shape.max_tokens_min + shape.max_tokens_max) / 2
    prompt = (shape.prompt_min + shape.prompt_max) / 2
    slots = float(params.max_num_seqs)
    full_step = params.step_base_seconds + slots * params.step_per_seq_seconds
    # Unloaded: the front-end hand-off, the prompt's prefill and the first step.
    ttft = params.frontend_seconds + prompt * params.step_per_prefill_token_seconds + params.step_base_seconds
    return ServiceModel(
        capacity=capacity,
        slots=min(slots, capacity * output * full_step),
        shape=params.step_base_seconds / params.step_per_seq_seconds,
        ttft_base=ttft,
        output_tokens=output,
        kv_per_request=1.0 / (slots + 1),
    )


def engine_calibration(
    params: EngineParams, capacity: float, slo: Slo, goal: float, shape: RequestShape | None = None
) -> Calibration:
    """The engine's service model, its capacity band and its knee for `slo` held for `goal` of requests."""
    measured = [measure_capacity(params, shape, seed=s) for s in CAPACITY_SEEDS]
    band = Estimate(
        capacity,
        min(capacity, *measured),
        max(capacity, *measured),
        f"the demo's engine on {len(measured)} saturated backlogs",
    )
    engine = "the demo's engine: its step times and request shapes"
    return Calibration(
        engine_model(params, capacity, shape),
        band,
        {"slots": engine, "shape": engine, "ttft_base": engine, "kv_per_request": "1 / (slots + 1)"},
        knee=engine_knee(params, capacity, slo, goal),
    )
