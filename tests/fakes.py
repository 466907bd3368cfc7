"""A `Source` for tests of the layers above the sources (after custom-metrics-apiserver's fake provider)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from adapter.catalogue import MetricDef
from adapter.errors import AdapterError
from adapter.selectors import Selector
from adapter.sources import Sample

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


class Clock:
    """A hand-moved monotonic clock for TTL and expiry tests: `now` changes only when a test sets it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
