"""The external metrics provider: catalogue × source × cache → one value per request.

This is where the failure table of DESIGN.md §3 is applied, once for every source:

| outcome of the latest fetch                | answer                                  |
|--------------------------------------------|-----------------------------------------|
| source error (unreachable, timeout, junk)  | 503 `SourceUnavailable`                 |
| sample older than `max_age`                | 503 `StaleSample`                       |
| no target series                           | 503 `NoTargets`                         |
| targets present, no value (or NaN/Inf)     | `on_empty`, or 503 `EmptyResult`        |
| some pods failed (scrape)                  | the source's `on_partial` policy        |
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from adapter.cache import ValueCache
from adapter.catalogue import MetricDef
from adapter.errors import EmptyResult, MetricNotFound, StaleSample
from adapter.selectors import Selector
from adapter.sources import Sample, Source
from adapter.telemetry import Telemetry


@dataclass(frozen=True)
class MetricValue:
    """The single aggregated item of an `ExternalMetricValueList`."""

    metric: str
    labels: dict[str, str]
    value: float
    timestamp: float
    #: how old the underlying sample was when served (seconds)
    age: float


class ExternalMetricsProvider(Protocol):
    """What the API layer needs (after custom-metrics-apiserver's `ExternalMetricsProvider`)."""

    def list_all(self) -> tuple[MetricDef, ...]:
        """Every metric served; must not raise and must not do I/O."""
        ...

    async def get(self, name: str, namespace: str, selector: Selector) -> MetricValue:
        """The metric's value for the namespace and selector, or an `AdapterError`; never a guess."""
        ...


class CachedProvider:
    """`ExternalMetricsProvider` backed by a `Source` through a `ValueCache`."""

    def __init__(
        self,
        metrics: tuple[MetricDef, ...],
        source: Source,
        cache: ValueCache,
        *,
        default_max_age: float,
        telemetry: Telemetry,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._metrics = {m.name: m for m in metrics}
        self._ordered = metrics
        self.source = source
        self.cache = cache
        self.default_max_age = default_max_age
        self.telemetry = telemetry
        self._clock = clock
        # Read at scrape time rather than written on every request.
        telemetry.cache_keys.set_function(lambda: len(cache))
        telemetry.held_sample_age.source = self._held_ages

    def list_all(self) -> tuple[MetricDef, ...]:
        return self._ordered

    def serves(self, name: str) -> bool:
        """Whether `name` is in the catalogue."""
        return name in self._metrics

    def lookup(self, name: str) -> MetricDef:
        """The definition of `name`, or `MetricNotFound`."""
        metric = self._metrics.get(name)
        if metric is None:
            raise MetricNotFound(f"metric {name!r} is not in the catalogue; known: {sorted(self._metrics)}")
        return metric

    async def get(self, name: str, namespace: str, selector: Selector) -> MetricValue:
        metric = self.lookup(name)
        scope = namespace if metric.namespaced else None

        async def fetch() -> Sample:
            return await self.source.fetch(metric, scope, selector)

        outcome, hit = await self.cache.get((metric.name, scope, selector), fetch)
        (self.telemetry.cache_hits if hit else self.telemetry.cache_misses).inc()
        if not isinstance(outcome, Sample):
            raise outcome
        return self.resolve(metric, outcome, selector)

    def _held_ages(self) -> Iterator[tuple[str, float]]:
        now = self._clock()
        for key, outcome in self.cache.outcomes():
            if isinstance(outcome, Sample) and isinstance(key, tuple):
                yield str(key[0]), max(0.0, now - outcome.timestamp)

    def resolve(self, metric: MetricDef, sample: Sample, selector: Selector) -> MetricValue:
        """Apply `max_age` and `on_empty` to a sample (the part of the failure table after the fetch)."""
        now = self._clock()
        age = max(0.0, now - sample.timestamp)
        max_age = metric.max_age_seconds if metric.max_age_seconds is not None else self.default_max_age
        if age > max_age:
            raise StaleSample(f"newest sample of {metric.name} is {age:.1f}s old (max_age {max_age:g}s)")
        value = sample.value
        if value is None or not math.isfinite(value):
            if metric.on_empty is None:
                raise EmptyResult(f"{metric.name} has targets but no data and on_empty is 'error'")
            value = metric.on_empty
        series = self.telemetry.series(metric.name)
        series.sample_age.observe(age)
        return MetricValue(metric.name, selector.equalities(), value, sample.timestamp, age)
