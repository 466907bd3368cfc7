"""How long each step runs, and the rates the profile tries, within the time budget.

A step lasts a settling time (old requests leave, the queue finds its level) and a measured window
long enough for `LIFETIMES` request lifetimes and `*_REQUESTS` requests, whichever is longer; both
scale with what the previous step measured. When the budget cannot hold the steps still planned at
that length, windows shrink to their share, never below `MIN_LIFETIMES` lifetimes and `MIN_REQUESTS`
requests; a step that cannot get even that ends the profile.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

LIFETIMES: Final = 6.0
SETTLE_LIFETIMES: Final = 1.5
#: requests per measured window (open loop), and the fewest a shrunk window may hold
RATE_REQUESTS: Final = 100
MIN_RATE_REQUESTS: Final = 30
#: the same for closed-loop steps, where one client alone sends one request per lifetime
CONCURRENCY_REQUESTS: Final = 10
MIN_CONCURRENCY_REQUESTS: Final = 6
MIN_LIFETIMES: Final = 3.0
#: offered rates tried, as fractions of the saturated throughput the concurrency sweep measured;
#: denser near the top, where the knee usually is (no rate above `steps.STABLE_SHARE` of it holds,
#: and the first above shows the queue growing)
RATE_FRACTIONS: Final = (0.6, 0.8, 0.9, 0.95, 1.05)
#: the factor between further rates when the last fraction still held (the sweep did not saturate)
BEYOND: Final = 1.15
#: bisect between the last rate that held and the first that failed while they differ by more than this
BISECT_TOLERANCE: Final = 0.03
MAX_BISECTIONS: Final = 2
#: the knee's rate is measured once more, from an idle server, for this many windows
CONFIRM_LENGTH: Final = 2.0
#: the concurrency sweep doubles its clients up to this many
MAX_CLIENTS: Final = 4096
WARMUP_REQUESTS: Final = 8
PREFILL_PROBES: Final = 4


class BudgetExhausted(Exception):
    """The time budget cannot hold another step."""


@dataclass(frozen=True)
class StepPlan:
    """Settling time and measured window of one step, in the server's seconds."""

    settle: float
    window: float

    @property
    def duration(self) -> float:
        return self.settle + self.window


def plan_step(e2e: float, rate: float, requests: float, lifetimes: float = LIFETIMES) -> StepPlan:
    """The step a request lifetime of `e2e` and an expected completion `rate` call for."""
    return StepPlan(SETTLE_LIFETIMES * e2e, max(lifetimes * e2e, requests / rate))


class Budget:
    """Real seconds left for the profile."""

    def __init__(self, seconds: float, time_scale: float = 1.0) -> None:
        self.seconds = seconds
        self.time_scale = time_scale
        self.deadline = time.monotonic() + seconds

    def remaining(self) -> float:
        """Server seconds left (real ones times the time scale)."""
        return max(0.0, self.deadline - time.monotonic()) * self.time_scale

    def fit(self, plan: StepPlan, e2e: float, rate: float, steps_left: int, least_requests: int) -> StepPlan:
        """`plan`, shrunk to its share of what is left but no shorter than `MIN_LIFETIMES` lifetimes
        and `least_requests` requests; `BudgetExhausted` if even that does not fit."""
        share = self.remaining() / max(1, steps_left)
        if plan.duration <= share:
            return plan
        least = max(MIN_LIFETIMES * e2e, least_requests / rate)
        window = max(least, min(plan.window, share - plan.settle))
        if plan.settle + window > self.remaining():
            raise BudgetExhausted(f"the budget of {self.seconds:g}s ran out")
        return StepPlan(plan.settle, window)
