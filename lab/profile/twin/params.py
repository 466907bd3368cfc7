"""An emulated engine that reproduces a profiled server: `vllm-autoscale emulate --profile FILE`.

The emulator's step takes `base + per_seq * seqs + per_prefill_token * prefill_tokens`. Under load
every running request prefills once per `O` steps (its output length), so a request's TPOT at a
mean batch `b` is `base + b * (per_seq + per_prefill_token * (P - 1) / O)` for prompts of `P`
tokens: a line in `b`. Its intercept is `base`, and its slope less the measured prefill cost per
token is `per_seq`.

**Which line.** The profile's closed-loop steps give TPOT at a batch held at the clients' count
(`tpot_vs_batch`): the engine's cost per batch size, exact. But a real vLLM 0.26.0 decodes a closed
loop's batch faster than an open loop's of the same size (TPOT 2.2-2.9 ms against 3.4-4.9 ms at
12-28 running on an H200 with a 1B model, 8-10 % slower with an 8B one, `docs/benchmarks.md`):
closed-loop clients with one output length prefill together and then decode together, while open
arrivals bring a prefill into nearly every step, and each arrival is work for the engine core.
Production traffic, and everything the lab drives, arrives open. So the line is scaled by
`open_loop_ratio`: the profile's open-loop TPOT over what the twin itself decodes at the same
arrival rates (a run of its engine on virtual time, `simulated_tpot`), over the busier half of the
open-loop steps, applied and measured again until it settles (a slower twin runs more requests at
a rate, which slows it again), when the first ratio's interval excludes 1. Comparing with the
twin's own open loop, not with the line, leaves out what any engine shows in an open loop (a request
meets a larger batch than the time average, and the prefills of arrivals land in its steps): an
emulator's profile then reads a ratio of 1, and a real engine's what only the engine adds.

Unloaded, TTFT is `frontend + base + per_seq + per_prefill_token * (P - 1)`, which leaves the
front-end time. Batch slots are the server's `max_num_seqs` when known, else the most requests it
ran at once; KV blocks and block size are the server's own (`cache_config_info`), so a KV-bound
server binds its twin the same way. Not modelled: the engine core's own CPU speed (on a small model
the step is CPU-bound and moves with the host), the front end's delay growing with load, a slower
decode with hundreds of requests waiting.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Callable
from dataclasses import replace

from lab.emulator.engine import Engine
from lab.emulator.params import EngineParams
from lab.profile.schema import Profile, Step
from lab.profile.twin.saturation import saturation_ratio
from lab.results_cache import cached
from lab.simulated_serving import serve, tpot
from lab.stats import linear_fit, t95

# The smallest step the twin may take: a fit that lands at or below zero is noise around a tiny cost.
_MIN_STEP_SECONDS = 1e-5
# Busy open-loop steps needed to scale the closed-loop line (fewer: the line as it is).
_MIN_OPEN_STEPS = 3
# Virtual seconds of Poisson arrivals the twin's engine runs per busy step (the first fifth warms it
# up): ~1,000 requests at the rates of a knee, so the simulated mean TPOT is good to a percent.
_SIMULATED_SECONDS = 60.0
# The ratio is applied and measured again up to this many times, until it moves by less than this.
_RATIO_ROUNDS = 4
_RATIO_SETTLED = 0.01


class TwinError(ValueError):
    """The profile lacks what a twin needs; the message names it."""


def simulated_tpot(
    params: EngineParams, rate: float, prompt: int, output: int, seed: int = 0
) -> float | None:
    """Mean TPOT of Poisson arrivals at `rate` on an emulated engine of `params`, run on virtual time
    (no server, no clock: `lab.simulated_serving.serve`); `None` when no request finished with two tokens."""
    draw = random.Random(seed)
    stream, at = [], draw.expovariate(rate)
    while at < _SIMULATED_SECONDS:
        stream.append((at, prompt, output))
        at += draw.expovariate(rate)
    engine = Engine(replace(params, step_jitter=0.0), seed=seed)
    served = serve([engine], stream, until=_SIMULATED_SECONDS * 4)
    tpots = [t for r in served if r.arrival >= 0.2 * _SIMULATED_SECONDS and (t := tpot(r)) is not None]
    return statistics.fmean(tpots) if tpots else None


def open_loop_ratio(profile: Profile, engine: Callable[[float], EngineParams]) -> float:
    """The factor on the closed-loop line at which the twin (`engine(ratio)`'s parameters) decodes
    the busy open-loop steps as the server did: the steps' mean TPOT over the twin's
    (`simulated_tpot` at each step's achieved rate), weighted by window, over the steps at or above
    half the busiest one's running, applied and measured again until it moves by under
    `_RATIO_SETTLED` (a slower twin runs more requests at a rate, and each decodes slower again).
    1 with fewer than `_MIN_OPEN_STEPS` such steps, or when the first ratio's 95 % interval (the
    steps' spread) holds 1."""
    steps = _open_steps(profile)
    if not steps:
        return 1.0
    busiest = max(s.running for s in steps)
    busy = [s for s in steps if s.running >= 0.5 * busiest]
    if len(busy) < _MIN_OPEN_STEPS:
        return 1.0
    prompt = max(1, round(profile.workload.prompt_tokens.mean))
    output = max(2, round(profile.workload.output_tokens.mean))
    ratio = 1.0
    for round_ in range(_RATIO_ROUNDS):
        params = engine(ratio)
        points: list[tuple[float, float]] = []
        for s in busy:
            twin = simulated_tpot(params, max(s.achieved_rate, 1e-6), prompt, output)
            if twin:
                points.append((s.tpot_seconds["mean"] / twin, s.window_seconds or 1.0))
        if len(points) < _MIN_OPEN_STEPS:
            return ratio
        weight = sum(w for _r, w in points)
        mean = sum(r * w for r, w in points) / weight
        if round_ == 0:
            spread = statistics.stdev(r for r, _w in points) / math.sqrt(len(points))
            if abs(mean - 1.0) <= t95(len(points) - 1) * spread:
                return 1.0
        ratio *= mean
        if abs(mean - 1.0) < _RATIO_SETTLED:
            break
    return ratio


def decode_points(profile: Profile) -> tuple[tuple[float, float], ...]:
    """The (running, TPOT) points the decode line is fitted through: the closed-loop levels without
    preemptions, where at least two are (else all of `tpot_vs_batch`).

    A level that preempted measured more than decoding: the server's mean TPOT counts the wait of a
    preempted request for its recompute as one long inter-token gap (vLLM 0.26.0's 64-client level
    of 2,048-token requests read 7.8 ms at 28 running where its preemption-free levels' line says
    6.8). The twin preempts by itself (`lab.emulator.engine`), so a line through those levels counts
    the preemptions twice: that twin ran 25 requests at 1.6 req/s where the server ran 20.5, and
    failed the rate the server held."""
    preempting = {s.running for s in profile.steps if s.kind == "concurrency" and s.preemptions > 0}
    clean = tuple(point for point in profile.tpot_vs_batch if point[0] not in preempting)
    return clean if len({x for x, _y in clean}) >= 2 else profile.tpot_vs_batch


def _open_steps(profile: Profile) -> list[Step]:
    """The open-loop steps with a running batch and a finite mean TPOT."""
    return [
        s
        for s in profile.steps
        if s.kind == "rate" and s.running > 0 and (t := s.tpot_seconds.get("mean")) and math.isfinite(t)
    ]


def twin_params(profile: Profile, base: EngineParams | None = None) -> EngineParams:
    """Engine parameters that reproduce `profile`'s server; the rest are `base`'s (the calibrated
    defaults). The line is scaled by the open-loop ratio where the profile has open-loop steps, else
    by its saturated throughput (`twin_saturation`). Kept on disk (`lab.results_cache`): the ratio
    runs the twin's engine dozens of times (25 s of CPU for an 8B profile), and every
    `emulate --profile` of a file, every demo of its twin, asks for the same parameters."""
    base = base or EngineParams()
    return cached("twins", (profile, base), functools.partial(_computed, profile, base))


def _computed(profile: Profile, base: EngineParams) -> EngineParams:
    fit = linear_fit(decode_points(profile))
    if fit is None:
        raise TwinError(
            "profile has fewer than two batch sizes in tpot_vs_batch: unable to fit TPOT against batch"
        )
    engine = functools.partial(_engine, profile, base, fit)
    if _busy_open_steps(profile) >= _MIN_OPEN_STEPS:
        return engine(open_loop_ratio(profile, engine))
    return engine(saturation_ratio(profile, engine))


def _busy_open_steps(profile: Profile) -> int:
    """Open-loop steps at or above half the busiest one's running: what `open_loop_ratio` scales by."""
    running = [s.running for s in _open_steps(profile)]
    return sum(1 for r in running if r >= 0.5 * max(running)) if running else 0


def _engine(profile: Profile, base: EngineParams, fit: tuple[float, float], ratio: float) -> EngineParams:
    """The twin's parameters with the closed-loop line `fit` scaled by `ratio`."""
    prompt = profile.workload.prompt_tokens.mean
    output = profile.workload.output_tokens.mean
    prefill = profile.prefill_seconds_per_token or 0.0
    carried = prefill * (prompt - 1) / max(output, 1.0)  # prefill per running request per step
    intercept, slope = fit[0] * ratio, fit[1] * ratio
    per_seq = max(0.0, slope - carried)
    step_base = max(_MIN_STEP_SECONDS, intercept)
    alone = [s for s in profile.steps if s.kind == "concurrency" and s.running > 0]
    frontend = base.frontend_seconds
    if alone:
        first = min(alone, key=lambda s: s.running)
        ttft = first.server_ttft_mean_seconds or first.ttft_seconds.get("mean")
        if ttft is not None:
            frontend = max(0.0, ttft - (step_base + per_seq + prefill * (prompt - 1)))
    server = profile.server
    running = max((s.running for s in profile.steps), default=0.0)
    slots = server.max_num_seqs or max(1, math.ceil(running))
    max_model_len = server.max_model_len or base.max_model_len
    blocks, block_size = server.num_gpu_blocks or base.num_gpu_blocks, server.block_size or base.block_size
    if blocks * block_size < max_model_len:
        blocks = math.ceil(max_model_len / block_size)
    return replace(
        base,
        max_num_seqs=slots,
        num_gpu_blocks=blocks,
        block_size=block_size,
        max_model_len=max_model_len,
        max_num_batched_tokens=max(base.max_num_batched_tokens, slots),
        step_base_seconds=step_base,
        step_per_seq_seconds=per_seq,
        step_per_prefill_token_seconds=prefill,
        frontend_seconds=frontend,
    )
