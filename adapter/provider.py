"""The external metrics provider: catalogue × source × cache → one value per request.

The failure table of DESIGN.md §3 is applied here for every source alike, save its first two rows and
its last, which only a source can tell: a source raises `SourceUnavailable`, `NoTargets` and (scrape,
`on_partial: error`) `PartialFailure` itself. Otherwise a source reports raw facts
(`adapter.sources.Sample`); `resolve` judges them in this order:

| fact of the latest fetch                                      | answer                              |
|---------------------------------------------------------------|-------------------------------------|
| source error (unreachable, timeout, junk, HTTP 5xx)            | 503 `SourceUnavailable`             |
| a role-bound metric whose selector excludes its role (`get`)   | 400 `RoleConflict`                  |
| no target series                                               | 503 `NoTargets`                     |
| ... of a role-bound metric: no pod of its role                 | 503 `NoRoleTargets`                 |
| sample time NaN, or later than now + `MAX_CLOCK_SKEW_SECONDS`   | 503 `FutureSample`                  |
| oldest contributing sample older than `max_age`                | 503 `StaleSample`                   |
| prefill backlog: requests held, no prompt size in the window    | 503 `EmptyResult` (never `on_empty`) |
| gauge: a family absent on a present target, or NaN/Inf          | 503 `GaugeGap` (never `on_empty`)   |
| ... the KV-fetch gauge absent: not a KV consumer                | 503 `ConnectorNotReported`          |
| event statistic (rate, mean, quantile) with no data, NaN or Inf | `on_empty`, or 503 `EmptyResult`    |
| quantile in the first bucket or past the last finite one        | 503 `Unresolved`                    |
| some pods failed (scrape)                                      | the source's `on_partial` policy    |
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple, Protocol

from adapter.cache import Outcome, ValueCache
from adapter.errors import (
    ConnectorNotReported,
    EmptyResult,
    FutureSample,
    GaugeGap,
    MetricNotFound,
    NoRoleTargets,
    NoTargets,
    SourceUnavailable,
    StaleSample,
)
from adapter.sources import GroupedSource, Sample, Scope, Source
from adapter.telemetry import Telemetry
from adapter.vocabulary import vllm
from adapter.vocabulary.catalogue import GaugeSpec, MetricDef, checked_value
from adapter.vocabulary.disaggregated import PrefillBacklogSpec
from adapter.vocabulary.roles import bind
from adapter.vocabulary.selectors import Selector

log = logging.getLogger(__name__)

#: how far in the future a sample may be dated before it is distrusted: clocks of a scraped pod, of
#: Prometheus and of the adapter drift by a little, never by minutes
MAX_CLOCK_SKEW_SECONDS: Final = 5.0
# Gaps quoted in one error message; a fleet-wide mismatch would otherwise log hundreds.
_GAPS_SHOWN: Final = 3


@dataclass(frozen=True)
class MetricValue:
    """The single aggregated item of an `ExternalMetricValueList`."""

    metric: str
    labels: dict[str, str]
    value: float
    timestamp: float
    #: how old the underlying sample was when served (seconds)
    age: float


class CacheKey(NamedTuple):
    """What the value cache keeps one value for: a metric, its scope and a selector."""

    metric: str
    namespace: str | None
    """The request's namespace, or `None` for a metric that is not namespaced."""
    selector: Selector


def _tenant(key: Hashable) -> Hashable:
    """The namespace a cache key is charged to (`None`: cluster-wide metrics share one tenant)."""
    return key.namespace if isinstance(key, CacheKey) else None


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
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._metrics = {m.name: m for m in metrics}
        self._ordered = metrics
        self.source = source
        self.cache = cache
        self.default_max_age = default_max_age
        self.telemetry = telemetry
        self._wall = wall
        grouped = isinstance(source, GroupedSource)
        #: the keys of the last refresh and their grouping by metric (`_by_metric`)
        self._grouped: tuple[list[Hashable], dict[str, tuple[list[CacheKey], list[Scope]]]] = ([], {})
        cache.attach(refresh_many=self._refresh_many if grouped else None, tenant=_tenant)
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
        if metric.role is not None:
            # A role-bound metric reads its pool only, whatever the HPA selected besides (400 if it
            # selected the other pool); the bound selector is the key, so both sources see the role.
            selector = bind(selector, metric.role, metric.name)

        async def fetch() -> Sample:
            return await self.source.fetch(metric, scope, selector)

        outcome, hit = await self.cache.get(CacheKey(metric.name, scope, selector), fetch)
        (self.telemetry.cache_hits if hit else self.telemetry.cache_misses).inc()
        if not isinstance(outcome, Sample):
            if metric.role is not None and isinstance(outcome, NoTargets):
                raise NoRoleTargets(
                    f"{outcome}: no pod labelled {metric.role} among them (a fleet without the "
                    f"{metric.role.name} pool, pods without the "
                    "label, or a Prometheus relabeling that drops it)",
                    str(metric.role),
                ) from outcome
            raise outcome
        return self.resolve(metric, outcome, selector)

    def _by_metric(self, keys: Sequence[Hashable]) -> dict[str, tuple[list[CacheKey], list[Scope]]]:
        """Each metric's keys and their scopes: the last refresh's while the keys are the same (a fleet's
        keys mostly are; the same scopes let the source keep its plan too)."""
        kept_keys, kept = self._grouped
        if keys == kept_keys:
            return kept
        by_metric: dict[str, tuple[list[CacheKey], list[Scope]]] = {}
        for key in keys:
            assert isinstance(key, CacheKey)
            members, scopes = by_metric.setdefault(key.metric, ([], []))
            members.append(key)
            scopes.append(Scope(key.namespace, key.selector))
        self._grouped = list(keys), by_metric
        return by_metric

    async def _refresh_many(self, keys: Sequence[Hashable]) -> Mapping[Hashable, Outcome]:
        """Every key's outcome, through one `fetch_many` per metric (the source groups what it can)."""
        answers = await asyncio.gather(
            *(
                self._fetch_metric(self._metrics[name], members, scopes)
                for name, (members, scopes) in self._by_metric(keys).items()
            )
        )
        return {key: outcome for answer in answers for key, outcome in answer}

    async def _fetch_metric(
        self, metric: MetricDef, keys: list[CacheKey], scopes: list[Scope]
    ) -> list[tuple[CacheKey, Outcome]]:
        assert isinstance(self.source, GroupedSource)
        try:
            outcomes: Sequence[Outcome] = await self.source.fetch_many(metric, scopes)
        except Exception as exc:  # a bug in a source fails this metric's keys closed
            log.exception("source raised an unexpected error refreshing %s", metric.name)
            outcomes = [SourceUnavailable(f"unexpected {exc.__class__.__name__}: {exc}")] * len(keys)
        return list(zip(keys, outcomes, strict=True))

    def _held_ages(self) -> Iterator[tuple[str, float]]:
        now = self._wall()
        for key, outcome in self.cache.outcomes():
            if isinstance(outcome, Sample) and isinstance(key, tuple) and math.isfinite(outcome.timestamp):
                yield str(key[0]), max(0.0, now - outcome.timestamp)

    def resolve(self, metric: MetricDef, sample: Sample, selector: Selector) -> MetricValue:
        """Judge a source's raw facts (the part of the failure table after the fetch)."""
        now = self._wall()
        timestamp = sample.timestamp
        if not math.isfinite(timestamp):
            raise FutureSample(f"sample time of {metric.name} is {timestamp!r}, not a number")
        if timestamp - now > MAX_CLOCK_SKEW_SECONDS:
            raise FutureSample(
                f"sample of {metric.name} is dated {timestamp - now:.1f}s in the future "
                f"(clock skew allowance {MAX_CLOCK_SKEW_SECONDS:g}s)"
            )
        age = max(0.0, now - timestamp)
        max_age = metric.max_age_seconds if metric.max_age_seconds is not None else self.default_max_age
        if age > max_age:
            raise StaleSample(f"oldest sample of {metric.name} is {age:.1f}s old (max_age {max_age:g}s)")
        value = sample.value
        # A lazy gauge's series appear with the first event (the gateway's queue): none yet on a
        # present target is empty, and on_empty applies; a NaN or Inf one is still broken.
        spec = metric.spec
        if (
            isinstance(spec, PrefillBacklogSpec)
            and not sample.gaps
            and (value is None or not math.isfinite(value))
        ):
            raise EmptyResult(
                f"{metric.name}: requests are queued on the prefill pods but none finished in the last "
                f"{spec.prompt.window_seconds:g}s (or its pods are "
                "too new for a rate): their prompt tokens are unknown"
            )
        if isinstance(spec, GaugeSpec) and not (spec.lazy and value is None):
            value = _gauge_value(metric, sample)
        elif value is None or not math.isfinite(value):
            if metric.on_empty is None:
                raise EmptyResult(f"{metric.name} has targets but no data and on_empty is 'error'")
            value = metric.on_empty
        else:
            value = checked_value(metric, value)
            assert value is not None
        series = self.telemetry.series(metric.name)
        series.sample_age.observe(age)
        return MetricValue(metric.name, selector.equalities(), value, timestamp, age)


def _gauge_value(metric: MetricDef, sample: Sample) -> float:
    """A gauge's value, or `GaugeGap`: vLLM creates its gauges at start-up, so a missing or
    non-finite gauge on a present target is a broken exporter, and `on_empty` never applies."""
    if sample.gaps:
        shown = "; ".join(str(gap) for gap in sample.gaps[:_GAPS_SHOWN])
        more = f" (and {len(sample.gaps) - _GAPS_SHOWN} more)" if len(sample.gaps) > _GAPS_SHOWN else ""
        if any(gap.family_name in vllm.KV_FETCH_BY_STAGE and gap.kind == "absent" for gap in sample.gaps):
            # Only a KV consumer exports it: the engine runs without a connector (or as a producer).
            raise ConnectorNotReported(f"{metric.name}: {shown}{more}: the pod is not a KV-transfer consumer")
        raise GaugeGap(f"{metric.name}: {shown}{more}")
    value = sample.value
    if value is None:
        raise GaugeGap(f"{metric.name}: targets are present but report none of its gauge families")
    if not math.isfinite(value):
        raise GaugeGap(f"{metric.name}: the gauges sum to {value!r}; some target reports NaN or Inf")
    return value
