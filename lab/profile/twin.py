"""An emulated engine that reproduces a profiled server: `vllm-autoscale emulate --profile FILE`.

The emulator's step takes `base + per_seq * seqs + per_prefill_token * prefill_tokens`. Under load
every running request prefills once per `O` steps (its output length), so a request's TPOT at a
mean batch `b` is `base + b * (per_seq + per_prefill_token * (P - 1) / O)` for prompts of `P`
tokens: a line in `b`. Its intercept is `base`, and its slope less the measured prefill cost per
token is `per_seq`. Unloaded, TTFT is `frontend + base + per_seq + per_prefill_token * (P - 1)`,
which leaves the front-end time. Batch slots are the server's `max_num_seqs` when known, else the
most requests it ran at once; KV blocks and block size are the server's own (`cache_config_info`),
so a KV-bound server binds its twin the same way.
"""

from __future__ import annotations

import math
from dataclasses import replace

from lab.emulator.params import EngineParams
from lab.profile.schema import Profile
from lab.stats import linear_fit

# The smallest step the twin may take: a fit that lands at or below zero is noise around a tiny cost.
_MIN_STEP_SECONDS = 1e-5


class TwinError(ValueError):
    """The profile lacks what a twin needs; the message names it."""


def twin_params(profile: Profile, base: EngineParams | None = None) -> EngineParams:
    """Engine parameters that reproduce `profile`'s server; the rest are `base`'s (the calibrated defaults)."""
    base = base or EngineParams()
    fit = linear_fit(profile.tpot_vs_batch)
    if fit is None:
        raise TwinError(
            "profile has fewer than two batch sizes in tpot_vs_batch: unable to fit TPOT against batch"
        )
    intercept, slope = fit
    prompt = profile.workload.prompt_tokens.mean
    output = profile.workload.output_tokens.mean
    prefill = profile.prefill_seconds_per_token or 0.0
    per_seq = max(0.0, slope - prefill * (prompt - 1) / max(output, 1.0))
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
