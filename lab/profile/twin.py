"""An emulated engine that reproduces a profiled server: `vllm-autoscale emulate --profile FILE`.

The emulator's step takes `decode(seqs) + per_prefill_token * prefill_tokens`. Under load every
running request prefills once per `O` steps (its output length), so a request's TPOT at a mean batch
`b` is `decode(b) + b * per_prefill_token * (P - 1) / O` for prompts of `P` tokens: the decode cost
is the measured TPOT less the prefill it carries.

**Which TPOT.** A real vLLM 0.26.0 decodes a closed loop's batch faster than an open loop's of the
same size (2.2-2.9 ms against 3.4-4.9 ms at 12-28 running on an H200, `docs/benchmarks.md`): closed-
loop clients with one output length move in lockstep, prefill together and decode together, while
open arrivals keep a prefill in nearly every step and requests at every context length. Production
traffic and everything the lab drives are open arrivals, so the twin's decode cost is a monotone
(isotonic) curve through the profile's **open-loop** steps (each weighted by its window), anchored
below their smallest batch by the closed-loop steps there; with fewer than `_MIN_OPEN_STEPS` open-
loop steps it is the line through the closed-loop `tpot_vs_batch` (intercept `base`, slope less the
prefill cost `per_seq`), as an emulated server (which has no lockstep advantage) shows it anyway.

Unloaded, TTFT is `frontend + decode(1) + per_prefill_token * (P - 1)`, which leaves the front-end
time. Batch slots are the server's `max_num_seqs` when known, else the most requests it ran at
once; KV blocks and block size are the server's own (`cache_config_info`), so a KV-bound server
binds its twin the same way. Not modelled: the front end's own delay growing with load (a few ms of
TTFT on the real engine), and the extra TPOT of a server with hundreds of requests waiting.
"""

from __future__ import annotations

import math
from dataclasses import replace

from lab.emulator.params import EngineParams
from lab.profile.knee import isotonic
from lab.profile.schema import Profile, Step
from lab.stats import linear_fit

# The smallest step the twin may take: a fit that lands at or below zero is noise around a tiny cost.
_MIN_STEP_SECONDS = 1e-5
# Open-loop steps needed for a decode curve of their own (fewer: the closed-loop line).
_MIN_OPEN_STEPS = 4


class TwinError(ValueError):
    """The profile lacks what a twin needs; the message names it."""


def open_loop_tpot(profile: Profile) -> list[tuple[float, float]]:
    """(running requests, TPOT) of a monotone fit through the open-loop steps, weighted by window and
    anchored below them by the closed-loop steps; empty with fewer than `_MIN_OPEN_STEPS` of them."""

    def point(s: Step) -> tuple[float, float, float] | None:
        tpot = s.tpot_seconds.get("mean")
        if tpot is None or not math.isfinite(tpot) or s.running <= 0:
            return None
        return s.running, tpot, s.window_seconds or 1.0

    opened = [p for s in profile.steps if s.kind == "rate" and (p := point(s)) is not None]
    if len(opened) < _MIN_OPEN_STEPS:
        return []
    lowest = min(b for b, _t, _w in opened)
    anchors = [
        p for s in profile.steps if s.kind == "concurrency" and (p := point(s)) is not None and p[0] < lowest
    ]
    # One point per batch size (two steps can run the same mean batch): the curve's x must rise.
    return sorted(dict(isotonic(opened + anchors)).items())


def twin_params(profile: Profile, base: EngineParams | None = None) -> EngineParams:
    """Engine parameters that reproduce `profile`'s server; the rest are `base`'s (the calibrated defaults)."""
    base = base or EngineParams()
    prompt = profile.workload.prompt_tokens.mean
    output = profile.workload.output_tokens.mean
    prefill = profile.prefill_seconds_per_token or 0.0
    carried = prefill * (prompt - 1) / max(output, 1.0)  # prefill per running request per step
    curve = tuple((b, max(_MIN_STEP_SECONDS, tpot - carried * b)) for b, tpot in open_loop_tpot(profile))
    fit = linear_fit(profile.tpot_vs_batch)
    if fit is None and not curve:
        raise TwinError(
            "profile has fewer than two batch sizes in tpot_vs_batch: unable to fit TPOT against batch"
        )
    intercept, slope = fit or (base.step_base_seconds, base.step_per_seq_seconds + carried)
    per_seq = max(0.0, slope - carried)
    step_base = max(_MIN_STEP_SECONDS, intercept)
    one = EngineParams(step_base_seconds=step_base, step_per_seq_seconds=per_seq, decode_curve=curve)
    alone = [s for s in profile.steps if s.kind == "concurrency" and s.running > 0]
    frontend = base.frontend_seconds
    if alone:
        first = min(alone, key=lambda s: s.running)
        ttft = first.server_ttft_mean_seconds or first.ttft_seconds.get("mean")
        if ttft is not None:
            frontend = max(0.0, ttft - (one.step_seconds(1, 1) + prefill * (prompt - 1)))
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
        decode_curve=curve,
        frontend_seconds=frontend,
    )
