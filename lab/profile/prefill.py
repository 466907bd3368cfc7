"""The prefill probe's order and its fit: what one prompt token adds to the TTFT of a request alone.

Prompts of a few lengths are sent one at a time, **interleaved**: each round sends every length once,
in an order of its own. A probe that sent all short prompts and then all long ones read 0.0, 1.6, 0.0
and 19.7 µs per token on four profiles of one GPU-bound 8B engine whose closed-loop TPOT slope implies
about 20: anything that drifts over the probe (a GPU clocking up from idle, a first use of a shape, the
server rendering a `/metrics` page while a request waits) then fell on one length and into the slope.
Interleaved, it falls on every length alike and widens the interval instead.

The first round is sent and recorded but not fitted (a first use of each length). The slope comes with
its 95 % interval; an interval that holds 0 is **not resolved**, and the profile says so rather than
give the twin a cost of 0 that was never measured.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from lab.profile.verdict import t95
from lab.stats import linear_fit


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

    def describe(self, requests: int) -> str:
        """One line for the summary: the slope, its interval, the `requests` sent and whether it resolved."""
        interval = (
            f"95 % interval {self.low * 1e6:.1f} to {self.high * 1e6:.1f}; {requests} requests alone, "
            "the first round unfitted"
        )
        if self.resolved:
            return f"prefill: {self.seconds_per_token * 1e6:.1f} µs of TTFT per prompt token ({interval})"
        return (
            f"prefill: not resolved ({self.seconds_per_token * 1e6:.1f} µs of TTFT per prompt token, {interval}, "
            "holds 0): a twin of this profile carries no prefill cost in its steps"
        )


def probe_order(lengths: Sequence[int], rounds: int, seed: int) -> list[int]:
    """`rounds` rounds of every length once, each round shuffled by `seed` (the same seed, the same order)."""
    shuffle = random.Random(f"{seed}:prefill").shuffle
    order: list[int] = []
    for _ in range(rounds):
        one = list(lengths)
        shuffle(one)
        order += one
    return order


def fit_prefill(points: Sequence[tuple[float, float]]) -> PrefillFit | None:
    """The least-squares slope of (prompt tokens, TTFT seconds) with its t interval; `None` with fewer
    than three points or fewer than two lengths."""
    line = linear_fit(points)
    if line is None or len(points) < 3:
        return None
    intercept, slope = line
    n = len(points)
    mean_x = sum(x for x, _y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _y in points)
    residual = sum((y - intercept - slope * x) ** 2 for x, y in points) / (n - 2)
    half = t95(n - 2) * math.sqrt(residual / spread)
    return PrefillFit(slope, slope - half, slope + half)
