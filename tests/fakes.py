"""A `Source` for tests of the layers above the sources (after custom-metrics-apiserver's fake provider)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from adapter.errors import AdapterError
from adapter.sources import Sample
from adapter.vocabulary.catalogue import MetricDef
from adapter.vocabulary.selectors import Selector

Answer = Sample | AdapterError | Callable[[MetricDef, str | None, Selector], Sample]


class FakeSource:
    """Answers from a table keyed by metric name; records every fetch; can be slowed down."""

    name = "fake"

    def __init__(self, answers: dict[str, Answer] | None = None, *, delay: float = 0.0) -> None:
        self.answers: dict[str, Answer] = answers or {}
        self.delay = delay
        self.fetches: list[tuple[str, str | None, Selector]] = []
        self.started = False
        self.closed = False
        self.ping_error: AdapterError | None = None

    async def start(self) -> None:
        self.started = True

    async def fetch(self, metric: MetricDef, namespace: str | None, selector: Selector) -> Sample:
        self.fetches.append((metric.name, namespace, selector))
        if self.delay:
            await asyncio.sleep(self.delay)
        answer = self.answers.get(metric.name, Sample(1.0, time.time(), 1))
        if isinstance(answer, AdapterError):
            raise answer
        if callable(answer):
            return answer(metric, namespace, selector)
        return answer

    async def ping(self) -> None:
        if self.ping_error is not None:
            raise self.ping_error

    def describe(self, metric: MetricDef, namespace: str | None, selector: Selector) -> str:
        return f"fake {metric.name} {namespace} {selector}"

    async def close(self) -> None:
        self.closed = True


class HandClock:
    """A hand-moved clock: `now` changes only when a test sets it. Injected as the wall clock (sample
    ages, ticks) or as the monotonic one (TTLs, idleness), as the test's parameter name says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Ticker:
    """An injected `sleep` and wall clock: a sleeper wakes only when the test calls `tick()`.

    `tick()` moves the wall clock to the end of the oldest pending sleep, wakes it, and returns once
    the woken task has gone to sleep again (or finished), so a test steps a background loop exactly
    one iteration at a time without waiting in real time.
    """

    def __init__(self, wall: float = 1000.0) -> None:
        self.wall = wall
        self.delays: list[float] = []
        self._pending: list[tuple[float, asyncio.Event]] = []
        self._changed = asyncio.Condition()

    def __call__(self) -> float:
        return self.wall

    async def sleep(self, delay: float) -> None:
        """The `sleep` to inject: records the delay and waits for a tick."""
        woken = asyncio.Event()
        self.delays.append(delay)
        async with self._changed:
            self._pending.append((self.wall + delay, woken))
            self._changed.notify_all()
        await woken.wait()

    async def sleeping(self, count: int = 1) -> None:
        """Wait until at least `count` sleeps are pending (the loop has reached its sleep); a loop
        that does not get there within 5 s has hung."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: len(self._pending) >= count), 5.0)

    async def tick(self, *, sleeps_again: bool = True) -> None:
        """Wake the earliest sleeper at its wake-up time. With `sleeps_again`, return once it has
        gone to sleep again (a bounded wait: failing after 5 s means the loop hung); without,
        return at once (the loop is expected to end)."""
        await self.sleeping()
        self._pending.sort(key=lambda item: item[0])
        until, woken = self._pending.pop(0)
        self.wall = max(self.wall, until)
        before = len(self.delays)
        woken.set()
        if sleeps_again:
            async with self._changed:
                await asyncio.wait_for(self._changed.wait_for(lambda: len(self.delays) > before), 5.0)
