"""The prefill probe's plan and its fit: what a prompt token costs a step that prefills it.

The probe sends **bursts** of k requests of the workload's prompt length at once, from idle, for a few
k, in rounds that each take every k once in an order of their own; a burst's first tokens come when
the step that prefilled all k prompts ends (while they fit its token budget), so the burst's mean TTFT
(the server's histogram, else the client's last) is that step's end. The slope of that time against
the burst's prompt tokens is the cost of a prompt token in a step: what an arrival adds to the steps
of everyone it shares them with, the cost the twin's steps carry (`step_per_prefill_token_seconds`).

Why not prompts of several lengths sent alone: on a GPU-bound 8B engine (vLLM 0.26.0, H200) a request
alone reached its first token in 25-35 ms whether its prompt held 128 or 1,024 tokens (a floor the
short prompts' compute sits under), and that probe read 0.0 to 7.9 µs per token over five profiles,
where bursts of 1,024-token prompts read 23 µs per token in a straight line from 2,048 to 16,384 tokens
and the closed-loop TPOT slope implies about 20
(`runs/2026-11-26-real-vllm-0.26.0-h200/gpu-bound-8b/prefill/`). A twin without that cost served the server's
rates with a TTFT tail several times shorter and a knee one grid step high.

The slope also carries what each request costs the server beyond its tokens (the front end takes the
burst's requests one at a time), spread over the workload's prompt: that share is a cost an arrival
brings too. The first round is sent and recorded but not fitted (first uses of a shape). The slope
comes with its 95 % interval; one that holds 0 is **not resolved**, and the profile says so rather
than give the twin a cost of 0 that was never measured.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from lab.profile import plan
from lab.stats import slope_interval


@dataclass(frozen=True)
class PrefillFit:
    """The slope of TTFT against prompt tokens (seconds per token) and its 95 % interval."""

    seconds_per_token: float
    low: float
    high: float

    @property
    def resolved(self) -> bool:
        """True when the interval lies above 0: prefill's cost was measured, not guessed."""
        return self.low > 0.0

    def describe(self, bursts: int) -> str:
        """One line for the summary: the slope, its interval, the `bursts` sent and whether it resolved."""
        interval = (
            f"95 % interval {self.low * 1e6:.1f} to {self.high * 1e6:.1f}; {bursts} bursts from idle, "
            "the first round unfitted"
        )
        if self.resolved:
            return f"prefill: {self.seconds_per_token * 1e6:.1f} µs per prompt token in a step ({interval})"
        return (
            f"prefill: not resolved ({self.seconds_per_token * 1e6:.1f} "
            f"µs per prompt token in a step, {interval}, "
            "holds 0): a twin of this profile carries no prefill cost in its steps"
        )


def probe_order(sizes: Sequence[int], rounds: int, seed: int) -> list[int]:
    """`rounds` rounds of every burst size once, each round shuffled by `seed` (the same seed, the same
    order)."""
    shuffle = random.Random(f"{seed}:prefill").shuffle
    order: list[int] = []
    for _ in range(rounds):
        one = list(sizes)
        shuffle(one)
        order += one
    return order


def burst_sizes(slots: int | None, prompt_tokens: int, kv_tokens: int | None) -> list[int]:
    """Burst sizes of `plan.PREFILL_BURSTS` that the server holds at once: no more requests than its
    slots, and their tokens within 90 % of its KV cache (a burst that preempts measures preemption;
    the margin covers blocks rounded up). Unknown slots cap nothing: a burst's requests beyond them
    wait for two tokens of the others, a wait that grows with the burst's tokens as well."""
    fits = [k for k in plan.PREFILL_BURSTS if slots is None or k <= slots]
    if kv_tokens is not None:
        fits = [k for k in fits if k * (prompt_tokens + 2) <= 0.9 * kv_tokens]
    return fits


def fit_prefill(points: Sequence[tuple[float, float]]) -> PrefillFit | None:
    """The least-squares slope of (a burst's prompt tokens, its TTFT seconds) with its t interval;
    `None` with fewer than three points or fewer than two burst sizes."""
    fit = slope_interval(points)
    return None if fit is None else PrefillFit(*fit)
