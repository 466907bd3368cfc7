"""The adapter's two clocks, injectable as one value.

The wall clock dates samples, judges their age and places scrape rounds and cache refreshes on its
multiples; the monotonic clock measures intervals (idleness, timeouts). Production reads the system's;
tests and the lab's virtual-time runs pass their own, so that one object changes every reading.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Clock:
    """A wall clock (Unix seconds) and a monotonic clock (seconds from an arbitrary origin)."""

    wall: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic


SYSTEM_CLOCK = Clock()
