"""The twin's speed where a profile has no open-loop steps to scale it by: its saturated batch.

`twin.open_loop_ratio` scales the closed-loop decode line by what the server adds under open
arrivals. A profile whose budget ran out before its open-loop steps (the 2,048-output-token profile
of the real 8B engine, `docs/benchmarks.md`) has none, and its twin decoded on the bare closed-loop
line: 4-6 % faster than the server's own 240 s open-loop steps, which for a KV-bound engine is the
difference between holding 1.8 req/s and preempting its way to seconds of TTFT there.

The levels with a standing queue are where a closed loop behaves as an open one does: a request is
admitted (and prefills) in nearly every step, beside a batch held at the slots' or the KV cache's
limit, preemptions and recomputes included. There the server's tokens per second over its running
requests is the time a step takes at that batch, all costs in (`per_token_at_saturation`). The twin
is run the same way (on virtual time, `2 * max_num_seqs` clients: a standing queue at any slot count)
and its line scaled until its time per token per running request matches, where it falls outside the
spread of the server's levels. Per running request, not requests per second: the twin packs its
cache a little differently (28.2 running where vLLM ran 27.8), and a throughput match would charge
that to the step's speed.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from dataclasses import replace
from typing import Final

from lab.emulator.engine import Engine
from lab.emulator.params import EngineParams
from lab.emulator.request import Request
from lab.profile.schema import Profile

# Virtual seconds of the simulated standing queue: warm-up (the first lifetimes, in which the clients
# that started together also finish together), then the measured stretch.
_WARM_LIFETIMES: Final = 3.0
_MEASURED_LIFETIMES: Final = 20.0
_ROUNDS: Final = 3
_SETTLED: Final = 0.005


def per_token_at_saturation(profile: Profile) -> list[float]:
    """Seconds per generated token per running request at each closed-loop level with a standing
    queue (a mean of at least one waiting): the server's step time at its saturated batch."""
    return [
        s.running / s.generation_tokens_per_second
        for s in profile.steps
        if s.kind == "concurrency" and s.waiting >= 1.0 and s.running > 0 and s.generation_tokens_per_second
    ]


def simulated_per_token(params: EngineParams, prompt: int, output: int, seed: int = 0) -> float | None:
    """`per_token_at_saturation` of an engine of `params` under a closed loop of `2 * max_num_seqs`
    clients on virtual time; `None` where it generated nothing in the measured stretch."""
    engine = Engine(replace(params, step_jitter=0.0), seed=seed)

    def send(at: float) -> None:
        engine.submit(prompt, output, ignore_eos=True, at=at, on_finish=again)

    def again(request: Request) -> None:
        assert request.finished is not None
        send(request.finished)

    draw = random.Random(seed)
    for _ in range(2 * params.max_num_seqs):
        send(draw.uniform(0.0, 0.1))
    # A lifetime at the full batch, by the engine's own step: the stretch scales with the workload.
    lifetime = output * params.step_seconds(params.max_num_seqs, params.max_num_seqs)
    engine.run_until(_WARM_LIFETIMES * lifetime)
    generated, running = engine.stats.generation_tokens, []
    tick = lifetime / 50
    for _ in range(int(_MEASURED_LIFETIMES * 50)):
        engine.run_until(engine.now + tick)
        running.append(len(engine.running))
    tokens = engine.stats.generation_tokens - generated
    seconds = _MEASURED_LIFETIMES * lifetime
    return statistics.fmean(running) * seconds / tokens if tokens else None


def saturation_ratio(profile: Profile, engine: Callable[[float], EngineParams]) -> float:
    """The factor on the decode line at which the twin (`engine(ratio)`'s parameters) takes the
    server's time per token per running request at saturation; 1 where the profile has no level
    with a standing queue, or where the twin's lies within the spread of the server's levels."""
    measured = per_token_at_saturation(profile)
    if not measured:
        return 1.0
    target = statistics.fmean(measured)
    prompt = max(1, round(profile.workload.prompt_tokens.mean))
    output = max(2, round(profile.workload.output_tokens.mean))
    ratio = 1.0
    for round_ in range(_ROUNDS):
        twin = simulated_per_token(engine(ratio), prompt, output)
        if twin is None:
            return ratio
        if round_ == 0 and min(measured) <= twin <= max(measured):
            return 1.0
        step = target / twin
        ratio *= step
        if abs(step - 1.0) < _SETTLED:
            break
    return ratio
