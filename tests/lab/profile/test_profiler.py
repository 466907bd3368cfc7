"""The profiler's search of the knee band, with steps that take no time and a budget set by hand:
what it measures is the order and the budget it keeps back, not a server (the emulator profiles in
tests/integration/test_profile_emulators.py measure whole runs)."""

from __future__ import annotations

import asyncio
import io
from typing import Any

from lab.profile import plan
from lab.profile.profiler import Profiler
from lab.profile.schema import Step
from lab.profile.settings import Settings
from lab.profile.view import ProgressView
from lab.profile.workload import fixed
from tests.lab.profile.builders import SLO, step

LIFETIME = 1.0
# The deciding step at 10 req/s and a 1 s lifetime: max(60 lifetimes, 400 requests / 10) = 60 s
# plus 6 s of settling.
DECIDING = plan.deciding_step(LIFETIME, 10.0).duration


class Budget(plan.Budget):
    """Server seconds left, spent by hand."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.left = seconds

    def remaining(self) -> float:
        return self.left


class Instant(Profiler):
    """A profiler whose rates hold below `knee`; each deciding step spends its plan of the budget."""

    def __init__(self, knee: float, budget: float) -> None:
        settings = Settings(url="http://x", model="m", workload=fixed(128, 32), slo=SLO)
        super().__init__(settings, ProgressView(io.StringIO(), title="t", budget=budget, percentile=0.9,
                                                interactive=False))  # fmt: skip
        self.spent = Budget(budget)
        self.budget = self.spent
        self.knee = knee
        self.measured: list[float] = []

    def _lifetime(self, rate: float) -> float:
        return LIFETIME

    async def _settle(self) -> None:
        return None

    async def _rate(self, rate: float, steps_left: int = 3, **how: Any) -> Step:
        duration = self._deciding(rate).duration * how.get("length", 1.0)
        if duration > self.budget.remaining():
            raise plan.BudgetExhausted("out")
        self.spent.left -= duration
        self.measured.append(rate)
        made = step(rate, held=rate < self.knee)
        self.steps.append(made)
        return made


def search(profiler: Instant, passed: float, failed: float) -> float:
    """The band's search and the repeat, as `_rates` runs them after a scan that bracketed the knee."""
    profiler.steps.append(step(passed, held=True))

    async def run() -> float:
        knee = await profiler._bisect(passed, failed)
        await profiler._confirm(knee)
        return knee

    return asyncio.run(run())


def test_the_band_is_searched_only_while_the_knees_repeat_still_fits() -> None:
    """Room for two deciding steps and a margin: one bisection, then the repeat of the highest rate
    that held, not three bisections that leave no time to repeat it."""
    profiler = Instant(knee=9.5, budget=2.5 * DECIDING)
    knee = search(profiler, 8.0, 10.0)
    assert profiler.measured == [9.0, 9.0], "one bisection (9 held), then 9 repeated"
    assert knee == 9.0


def test_with_room_the_band_narrows_to_its_tolerance_and_the_knee_is_repeated() -> None:
    profiler = Instant(knee=9.5, budget=20 * DECIDING)
    knee = search(profiler, 8.0, 10.0)
    assert profiler.measured[:3] == [9.0, 9.5, 9.25] and profiler.measured[-1] == knee == 9.25
