"""The adapter's two clocks, injectable as one value.

The wall clock dates samples, judges their age and places scrape rounds and cache refreshes on its
multiples; the monotonic clock measures intervals (idleness, timeouts). Production reads the system's;
tests and the lab's virtual-time runs pass their own, so that one object changes every reading.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

# A timer this short is due at once: it only orders the resumption after the I/O the loop polls.
_AFTER_IO_SECONDS: Final = 1e-6


@dataclass(frozen=True)
class Clock:
    """A wall clock (Unix seconds) and a monotonic clock (seconds from an arbitrary origin)."""

    wall: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic


SYSTEM_CLOCK = Clock()


async def after_pending_io() -> None:
    """Pause a job of many parts (a refresh) until the event loop has run the I/O callbacks ready
    now (a request that arrived) and the steps they started.

    `asyncio.sleep(0)` resumes in the very next iteration, ahead of the I/O that iteration polls, so
    a request arriving during such a job waited for one part in each iteration it took (two or
    three). A due timer runs after the iteration's I/O callbacks, and the task it wakes after the
    steps those callbacks scheduled: the request waits at most for the part running when it came.
    """
    await asyncio.sleep(_AFTER_IO_SECONDS)
