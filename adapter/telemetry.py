"""The adapter's own Prometheus metrics, in a registry per application (no module globals).

Names use the `vllm_autoscale_` prefix. Each is written once, below, as the series a query selects
(a counter's with its `_total`, a histogram's without its `_bucket`/`_sum`/`_count`); the metrics are
registered under these names and the alerts and the adapter-health dashboard import them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from adapter.errors import StaleSample

# The series names (prometheus_client registers a counter `x_total` as the family `x`).
REQUESTS: Final = "vllm_autoscale_requests_total"
REQUEST_SECONDS: Final = "vllm_autoscale_request_duration_seconds"
ERRORS: Final = "vllm_autoscale_errors_total"
UPSTREAM_SECONDS: Final = "vllm_autoscale_upstream_query_duration_seconds"
UPSTREAM_ERRORS: Final = "vllm_autoscale_upstream_errors_total"
CACHE_HITS: Final = "vllm_autoscale_cache_hits_total"
CACHE_MISSES: Final = "vllm_autoscale_cache_misses_total"
CACHE_KEYS: Final = "vllm_autoscale_cache_keys"
SERVED_SAMPLE_AGE: Final = "vllm_autoscale_served_sample_age_seconds"
HELD_SAMPLE_AGE: Final = "vllm_autoscale_held_sample_age_seconds"
READY: Final = "vllm_autoscale_ready"
GRPC_CALLS: Final = "vllm_autoscale_grpc_calls_total"
GRPC_SECONDS: Final = "vllm_autoscale_grpc_call_duration_seconds"
#: the `reason` label of `ERRORS` when a sample was too old to serve
STALE_REASON: Final = StaleSample.label

# Request latency of a cached answer is well under a millisecond; a first fetch waits for the source.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
# Served-sample age: seconds in scrape mode, tens of seconds behind a 30 s Prometheus scrape.
_AGE_BUCKETS = (0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 15, 30, 45, 60, 90, 120, 300)


@dataclass(frozen=True)
class MetricSeries:
    """The label children of one metric name, bound once: `labels()` costs a lock and a dict lookup
    on every call, which the cached-answer path would pay six times per request."""

    ok: Any
    request_seconds: Any
    sample_age: Any


class HeldSampleAge(Collector):
    """Age, at scrape time, of the oldest sample the adapter holds for each metric's live keys.

    Computed when Prometheus scrapes rather than remembered from the last answer: a key nobody asks
    for any more drops out of the cache and out of this gauge, so an alert on it cannot fire forever
    on a value from before the HPA went away.
    """

    name = HELD_SAMPLE_AGE

    def __init__(self) -> None:
        #: yields (metric, age in seconds) for every live key holding a sample; set by the provider
        self.source: Callable[[], Iterable[tuple[str, float]]] = lambda: ()

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            self.name,
            "Age now of the oldest sample held for the metric's live keys: what the adapter would serve.",
            labels=["metric"],
        )

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        oldest: dict[str, float] = {}
        for metric, age in self.source():
            oldest[metric] = max(age, oldest.get(metric, age))
        family = self._family()
        for metric, age in sorted(oldest.items()):
            family.add_metric([metric], age)
        yield family


class Telemetry:
    """Every metric the adapter exports about itself."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            REQUESTS,
            "External metrics API requests by metric and HTTP code.",
            ["metric", "code"],
            registry=r,
        )
        self.request_seconds = Histogram(
            REQUEST_SECONDS,
            "Latency of external metrics API requests.",
            ["metric"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            ERRORS,
            "Error answers by metric and reason (stale, source_unavailable, ...).",
            ["metric", "reason"],
            registry=r,
        )
        self.upstream_seconds = Histogram(
            UPSTREAM_SECONDS,
            "Latency of queries to the metrics source.",
            ["source", "outcome"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.upstream_errors = Counter(
            UPSTREAM_ERRORS,
            "Failed queries to the metrics source, by outcome.",
            ["source", "outcome"],
            registry=r,
        )
        self.cache_hits = Counter(CACHE_HITS, "Answers served from the in-memory value cache.", registry=r)
        self.cache_misses = Counter(
            CACHE_MISSES, "Answers that waited for a first fetch of their key.", registry=r
        )
        self.cache_keys = Gauge(CACHE_KEYS, "Keys (metric, namespace, selector) being refreshed.", registry=r)
        self.sample_age = Histogram(
            SERVED_SAMPLE_AGE,
            "Age of the underlying sample at the moment a value was served.",
            ["metric"],
            buckets=_AGE_BUCKETS,
            registry=r,
        )
        self.held_sample_age = HeldSampleAge()
        r.register(self.held_sample_age)
        self.ready = Gauge(READY, "1 once the metrics source has answered.", registry=r)
        self.grpc_calls = Counter(
            GRPC_CALLS,
            "KEDA external scaler calls by gRPC method and status code.",
            ["method", "code"],
            registry=r,
        )
        self.grpc_seconds = Histogram(
            GRPC_SECONDS,
            "Latency of KEDA external scaler unary calls (streams are open for minutes and are not timed).",
            ["method"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self._series: dict[str, MetricSeries] = {}

    def series(self, metric: str) -> MetricSeries:
        """The bound children of `metric` (created on first use)."""
        bound = self._series.get(metric)
        if bound is None:
            bound = MetricSeries(
                ok=self.requests.labels(metric, "200"),
                request_seconds=self.request_seconds.labels(metric),
                sample_age=self.sample_age.labels(metric),
            )
            self._series[metric] = bound
        return bound

    def observe_upstream(self, source: str, outcome: str, seconds: float) -> None:
        """Record one source query (outcome: success, timeout, error)."""
        self.upstream_seconds.labels(source, outcome).observe(seconds)
        if outcome != "success":
            self.upstream_errors.labels(source, outcome).inc()
