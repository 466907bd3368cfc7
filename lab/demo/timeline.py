"""The run's time: emulated seconds since the load started, on the fleet's `ScaledClock`.

Every part of the demo (load, HPA, observation) reads and waits on this one timeline, so their
schedules stay in step whatever the time scale. A periodic round (`every`) happens at its scheduled
time: inside it `now()` is that time, not the few milliseconds of event-loop latency after it (times
the time scale), so an HPA sync at 225 s sees its recommendation of 165 s exactly one 60 s window
back, and decides the same way in every run.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable

from lab.clock import ScaledClock

log = logging.getLogger(__name__)

# Rounds of different schedules this close (emulated seconds) are due at the same time.
_SAME_TIME = 1e-9

# The round being run: its timeline, its task and its scheduled time. Tasks it starts inherit the
# context but not the round (they run on after it), hence the task in the key.
_ROUND: contextvars.ContextVar[tuple[Timeline, asyncio.Task[object] | None, float] | None] = (
    contextvars.ContextVar("round", default=None)
)


class Timeline:
    """Emulated seconds since `begin()` (since the clock's creation before it)."""

    def __init__(self, clock: ScaledClock) -> None:
        self.clock = clock
        self.start = 0.0

    def begin(self) -> None:
        """Make now t = 0: the load starts."""
        self.start = self.clock.now()

    def now(self) -> float:
        """Emulated seconds since the load started; inside a round of `every`, the round's scheduled time."""
        current = _ROUND.get()
        if current is not None and current[0] is self and current[1] is asyncio.current_task():
            return current[2]
        return self._elapsed()

    def _elapsed(self) -> float:
        return self.clock.now() - self.start

    async def sleep_until(self, t: float) -> None:
        """Sleep until emulated time `t` (returns at once if it has passed)."""
        delay = self.clock.real(t - self._elapsed())
        if delay > 0:
            await asyncio.sleep(delay)

    async def every(self, period: float, action: Callable[[], Awaitable[None]]) -> None:
        """Run `action` at t = 0, period, 2 × period, ...
        (emulated), whatever each run takes; until cancelled."""
        await self.rounds((period, action))

    async def rounds(self, *schedules: tuple[float, Callable[[], Awaitable[None]]]) -> None:
        """Run each `(period, action)` at t = 0, period, 2 × period, ... until cancelled; actions due at
        the same time run one after the other in the order given, so the observer that follows the
        HPA at t records the sync of t, not the one before it."""
        rounds = [0] * len(schedules)  # the next round of each, counted (k × period does not drift)
        while True:
            due = [k * period for k, (period, _) in zip(rounds, schedules, strict=True)]
            t = min(due)
            await self.sleep_until(t)
            for i, (period, action) in enumerate(schedules):
                if due[i] - t > _SAME_TIME:
                    continue
                await self._round(t, action)
                rounds[i] += 1
                # Fell behind (CPU, on the wall clock): skip rounds, as the controller's queue would.
                while rounds[i] * period < self._elapsed():
                    rounds[i] += 1

    async def _round(self, t: float, action: Callable[[], Awaitable[None]]) -> None:
        token = _ROUND.set((self, asyncio.current_task(), t))
        try:
            await action()
        except Exception:  # one failed round must not end the demo
            log.exception("demo loop step failed")
        finally:
            _ROUND.reset(token)
