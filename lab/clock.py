"""Emulated time: `ScaledClock` maps the event loop's clock to an engine's seconds.

Every part of the lab that speaks to an engine on its own time (the emulator, the load drivers, the
profile, the experiments, the rehearsal) reads one of these: `time_scale` emulated seconds pass per
second of `monotonic`, the system's clock or a virtual-time loop's (`lab.virtual_time`).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class ScaledClock:
    """Emulated seconds since creation: `time_scale` of them pass per second of `monotonic`.

    `monotonic` is the event loop's time: the system's, or a virtual-time loop's (`lab.virtual_time`),
    on which the emulated seconds are repeatable and cost no CPU."""

    def __init__(self, time_scale: float = 1.0, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        if not time_scale > 0:
            raise ValueError(f"time_scale {time_scale!r} must be > 0")
        self.time_scale = time_scale
        self.monotonic = monotonic
        self._origin = monotonic()

    def now(self) -> float:
        """The current emulated time."""
        return (self.monotonic() - self._origin) * self.time_scale

    def real(self, emulated_seconds: float) -> float:
        """Real seconds that `emulated_seconds` take."""
        return emulated_seconds / self.time_scale
