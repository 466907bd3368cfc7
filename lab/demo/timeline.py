"""The run's time: emulated seconds since the load started, on the fleet's `ScaledClock`.

Every part of the demo (load, HPA, observation) reads and waits on this one timeline, so their
schedules stay in step whatever the time scale.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from lab.emulator import ScaledClock

log = logging.getLogger(__name__)


class Timeline:
    """Emulated seconds since `begin()` (since the clock's creation before it)."""

    def __init__(self, clock: ScaledClock) -> None:
        self.clock = clock
        self.start = 0.0

    def begin(self) -> None:
        """Make now t = 0: the load starts."""
        self.start = self.clock.now()

    def now(self) -> float:
        """Emulated seconds since the load started."""
        return self.clock.now() - self.start

    async def sleep_until(self, t: float) -> None:
        """Sleep until emulated time `t` (returns at once if it has passed)."""
        delay = self.clock.real(t - self.now())
        if delay > 0:
            await asyncio.sleep(delay)

    async def every(self, period: float, action: Callable[[], Awaitable[None]]) -> None:
        """Run `action` at t = 0, period, 2 × period, ... (emulated), whatever each run takes; until cancelled."""
        t = 0.0
        while True:
            await self.sleep_until(t)
            try:
                await action()
            except Exception:  # one failed round must not end the demo
                log.exception("demo loop step failed")
            t += period
            while t < self.now():  # fell behind (CPU): skip rounds, as the controller's queue would
                t += period
