"""An asyncio event loop on virtual time: the lab's runs become repeatable and independent of the CPU.

The demo runs a whole cluster in one process: emulated replicas, the real adapter, the load and the
HPA model, talking HTTP over loopback. On the wall clock, every millisecond the CPU spends is a
millisecond (times the time scale) of emulated time; a busy machine delays a scrape, a sync or a
request, and the same seed gives a different run. On this loop time stands still while callbacks run
and jumps to the next timer when nothing is left to do, as in a discrete-event simulation: CPU work
costs no time, and a seed gives one run.

"Nothing is left to do" means no callback is ready, no socket is readable or writable, and no thread
started through `run_in_executor` is still running. Sockets are real: another process (a `curl` at
the adapter) is served as usual, and loopback traffic between the parts arrives while the sender's
system call runs (Linux delivers a loopback packet in the softirq that the send itself raises and
runs). Before it jumps, the loop yields the CPU once and looks again, for the rare packet whose
delivery the kernel deferred to its softirq thread. (A real poll with a timeout would cost a whole
millisecond per jump: epoll counts in milliseconds, and a demo makes tens of thousands of jumps.)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import selectors
import time
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from adapter.clock import SYSTEM_CLOCK, Clock

T = TypeVar("T")

#: Real seconds to wait at a time for a thread, while virtual time waits for it.
_THREAD_POLL_SECONDS: Final = 0.01
#: Where virtual wall-clock time starts (2026-01-01T00:00:00Z): a fixed epoch, so that things placed
#: on wall-clock multiples (scrape rounds, cache refreshes) fall at the same virtual instants in
#: every run.
VIRTUAL_EPOCH: Final = 1_767_225_600.0


class _IdleJumpSelector(selectors.DefaultSelector):
    """The platform's selector, which jumps the loop's clock instead of sleeping through a timeout."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualTimeLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """Ready events now; if none, the loop's clock moves to where the timeout would have ended."""
        loop = self.loop
        if loop is None or (timeout is not None and timeout <= 0):
            return list(super().select(timeout))
        events = list(super().select(0))
        if events:
            return events
        if timeout is None:  # no timer at all: only the outside world (or a thread) can wake us
            return list(super().select(None))
        if loop.threads:  # a thread's work costs no virtual time, but it must finish first
            return list(super().select(_THREAD_POLL_SECONDS))
        os.sched_yield()  # let a deferred loopback delivery (ksoftirqd) run before concluding we are idle
        events = list(super().select(0))
        if not events:
            loop.advance(timeout)
        return events


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose `time()` is virtual: it starts at 0 and moves only when idle."""

    def __init__(self) -> None:
        selector = _IdleJumpSelector()
        super().__init__(selector)
        selector.loop = self
        self._now = 0.0
        self.threads = 0

    def time(self) -> float:
        """Virtual seconds since the loop was made."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock `seconds` forward (the selector calls this when the loop is idle)."""
        self._now += seconds

    def run_in_executor(  # type: ignore[override]
        self, executor: concurrent.futures.Executor | None, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        """As the base loop, counting the thread as work in progress until its result is back."""
        future = super().run_in_executor(executor, func, *args)
        self.threads += 1

        def done(_: asyncio.Future[T]) -> None:
            self.threads -= 1

        future.add_done_callback(done)
        return future

    def clock(self) -> Clock:
        """This loop's time as the adapter reads it: monotonic seconds and a wall clock from a fixed epoch."""
        return Clock(wall=lambda: VIRTUAL_EPOCH + self._now, monotonic=self.time)


def loop_time() -> float:
    """The running event loop's time (virtual on a `VirtualTimeLoop`); the system's monotonic clock
    outside a loop (where a standard loop's time would read the same)."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


def loop_clock() -> Clock:
    """The adapter's clocks for the running loop: virtual on a `VirtualTimeLoop`, else the system's."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return SYSTEM_CLOCK
    return loop.clock() if isinstance(loop, VirtualTimeLoop) else SYSTEM_CLOCK


def run(main: Coroutine[Any, Any, T], *, virtual: bool = True) -> T:
    """Run `main` to completion on a new `VirtualTimeLoop` (or, `virtual=False`, a standard loop)."""
    factory = VirtualTimeLoop if virtual else None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
