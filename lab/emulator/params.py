"""The emulated engine's parameters: one frozen dataclass, one docstring per field.

The defaults reproduce the real run recorded in `shared/data/vllm-0.26.0/` (a Llama-3.2-1B-shaped
model on one H200 with `--max-num-seqs 32 --max-model-len 4096 --num-gpu-blocks-override 2048`):
mean TPOT 1.73 ms at ~3 running rising to 3.25 ms at ~27, TTFT ~17 ms unloaded, the KV cache (not
`max_num_seqs`) bounding concurrency at ~27, and a capacity of ~30 requests/s for prompts of
U[200,1800] tokens and 64-512 output tokens. `tests/lab/emulator/test_calibration.py` holds them to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class EngineParams:
    """How one emulated vLLM engine schedules and how long its steps take (times in emulated seconds)."""

    max_num_seqs: int = 32
    """Batch slots (`--max-num-seqs`): the most requests running at once."""

    num_gpu_blocks: int = 2048
    """KV-cache blocks (`--num-gpu-blocks-override`); the pool holds `num_gpu_blocks * block_size` tokens."""

    block_size: int = 16
    """Tokens per KV-cache block (`--block-size`)."""

    max_model_len: int = 4096
    """Longest prompt plus output (`--max-model-len`); also sets the `request_tokens` histogram buckets."""

    max_num_batched_tokens: int = 8192
    """Token budget of one engine step (`--max-num-batched-tokens`); longer prompts prefill in chunks."""

    enable_prefix_caching: bool = True
    """Reuse cached KV blocks of identical prompt prefixes (`--enable-prefix-caching`, vLLM's default)."""

    step_base_seconds: float = 0.00152
    """Fixed cost of one engine step (scheduling, kernel launches, sampling): 1.52 ms fits the real run."""

    step_per_seq_seconds: float = 0.000047
    """Added step time per scheduled request: what makes TPOT
    rise with the batch (0.047 ms fits 1.73 → 3.25 ms)."""

    step_per_prefill_token_seconds: float = 0.000005
    """Added step time per prompt token computed in the step (chunked prefill slows the decodes beside it)."""

    step_jitter: float = 0.1
    """Relative spread of step times (uniform ±), so latency
    histograms spread over buckets as real ones do."""

    frontend_seconds: float = 0.010
    """Tokenization and front-end to engine hand-off: counted in TTFT and e2e, not in queue time."""

    eos_probability: float = 0.002
    """Chance that a generated token is EOS when the request did not set `ignore_eos` (mean 500 tokens)."""

    max_num_queued_reqs: int | None = None
    """Reject new requests with HTTP 503 when this many wait
    (`--max-num-queued-reqs`); `None` never rejects."""

    gpu_memory_utilization: float = 0.92
    """Reported in `vllm:cache_config_info` only (vLLM 0.33's default)."""

    vocab_size: int = 32000
    """Token ids of text prompts and generated tokens are drawn below this."""

    def __post_init__(self) -> None:
        for name in (
            "max_num_seqs",
            "num_gpu_blocks",
            "block_size",
            "max_model_len",
            "max_num_batched_tokens",
            "vocab_size",
        ):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name} {value!r} must be a positive integer")
        for name in (
            "step_base_seconds",
            "step_per_seq_seconds",
            "step_per_prefill_token_seconds",
            "frontend_seconds",
        ):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} {value!r} must be a finite number >= 0")
        if self.step_base_seconds + self.step_per_seq_seconds <= 0:
            raise ValueError("step_base_seconds + step_per_seq_seconds must be > 0 (a step must take time)")
        if not 0 <= self.step_jitter < 1:
            raise ValueError(f"step_jitter {self.step_jitter!r} must be in [0, 1)")
        if not 0 <= self.eos_probability < 1:
            raise ValueError(f"eos_probability {self.eos_probability!r} must be in [0, 1)")
        if self.max_num_queued_reqs is not None and self.max_num_queued_reqs < 0:
            raise ValueError(f"max_num_queued_reqs {self.max_num_queued_reqs!r} must be >= 0 or None")
        if self.num_gpu_blocks * self.block_size < self.max_model_len:
            # vLLM refuses to start when one full-length sequence cannot fit in the KV cache.
            raise ValueError(
                f"num_gpu_blocks * block_size {self.num_gpu_blocks * self.block_size!r} must be >= "
                "max_model_len "
                f"({self.max_model_len})"
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens {self.max_num_batched_tokens!r} must be >= max_num_seqs "
                f"({self.max_num_seqs})"
            )

    def step_seconds(self, num_seqs: int, num_tokens: int) -> float:
        """Mean duration of a step scheduling `num_seqs` requests and `num_tokens` tokens in all.

        Every request beyond its one decode token is prefill: those tokens cost per token.
        """
        return (
            self.step_base_seconds
            + self.step_per_seq_seconds * num_seqs
            + self.step_per_prefill_token_seconds * (num_tokens - num_seqs)
        )
