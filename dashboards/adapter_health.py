"""Health of the vllm-autoscale adapter itself, from its own `vllm_autoscale_*` metrics.

Its variables select the adapter's namespace and pods (not the models'), and which external metric.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from adapter.config import PrometheusSettings
from dashboards import layout
from dashboards import panels as p
from dashboards.layout import Row
from dashboards.queries import adapter_metrics as a
from dashboards.queries.grafana import Query

#: the adapter answers 503 past this age by default (Prometheus source), so the panel turns red there
DEFAULT_MAX_AGE_SECONDS: Final = PrometheusSettings().max_age
#: a source query slower than the default timeout is an error, never a value
UPSTREAM_LEVELS = p.thresholds(
    (PrometheusSettings().timeout / 2, "orange"), (PrometheusSettings().timeout, "red")
)
#: orange where the stale-data alert starts counting; red past max_age, where the adapter answers 503
AGE_LEVELS = p.thresholds(
    (p.ALERT_DEFAULTS.adapter_stale_seconds, "orange"), (DEFAULT_MAX_AGE_SECONDS, "red")
)
#: the HPA controller syncs every 15 s and the aggregator times out long before; answers are cached, so
#: anything past a quarter second means first fetches are waiting on the source
LATENCY_LEVELS = p.thresholds((0.25, "orange"), (1.0, "red"))


def _variables() -> list[layout.Variable]:
    return [
        layout.query_variable("namespace", "Adapter namespace", a.namespace_variable()),
        layout.query_variable("pod", "Adapter pod", a.pod_variable()),
        layout.query_variable("metric", "External metric", a.metric_variable()),
    ]


def _p50_p99(
    title: str, description: str, quantile: Callable[[float], Query], levels: p.Thresholds
) -> p.Placed:
    """The median and the tail of a latency, half a line wide."""
    return p.timeseries(title, description, [quantile(0.5), quantile(0.99)], p.SECONDS, levels, width=12)


def at_a_glance() -> Row:
    return Row(
        "At a glance",
        [
            p.stat(
                "Ready replicas",
                "Adapter pods whose metrics source has answered at least once, and all adapter pods.",
                [a.ready(), a.replicas()],
                p.COUNT,
                p.thresholds((1, "green"), base="red"),
                links=[p.runbook("VLLMAutoscaleAdapterDown")],
                width=6,
            ),
            p.stat(
                "Non-2xx answers",
                "Share of external-metrics answers that were errors: the HPA freezes the model's scale on "
                "each one.",
                [a.error_ratio()],
                p.RATIO,
                p.FAILED_LEVELS,
                links=[p.runbook("VLLMHPAMetricsUnavailable")],
                width=6,
            ),
            p.stat(
                "Cache hit ratio",
                "Answers served from memory / all answers. Misses wait for a first fetch of their key.",
                [a.cache_hit_ratio()],
                p.RATIO,
                p.thresholds((0.9, "green"), base="orange"),
                width=6,
            ),
            p.stat(
                "Cached keys",
                "(metric, namespace, selector) keys refreshed in the background, per pod.",
                [a.cache_keys()],
                p.COUNT,
                width=6,
            ),
        ],
    )


def external_metrics_api() -> Row:
    return Row(
        "External metrics API",
        [
            p.timeseries(
                "Requests by metric",
                "External-metrics requests per second by metric (the HPA asks every 15 s per metric and "
                "HPA).",
                [a.requests(("metric",))],
                p.REQUESTS_PER_SECOND,
                width=12,
            ),
            p.timeseries(
                "Requests by HTTP code",
                "503: source down, stale or no targets; 404: "
                "unknown metric; 400: bad selector; 401/403: auth.",
                [a.requests(("code",))],
                p.REQUESTS_PER_SECOND,
                stacked=True,
                width=12,
            ),
            _p50_p99(
                "Request latency",
                "p50 and p99 of external-metrics request latency. "
                "Cached answers take well under a millisecond.",
                a.latency,
                LATENCY_LEVELS,
            ),
            p.timeseries(
                "Errors by reason",
                "Error answers per second by metric and reason (stale, source_unavailable, ...).",
                [a.errors()],
                p.REQUESTS_PER_SECOND,
                p.ANY_LEVELS,
                links=[
                    p.runbook("VLLMHPAMetricsUnavailable"),
                    p.runbook("VLLMAutoscaleServingStaleData"),
                ],
                width=12,
            ),
        ],
    )


def keda_external_scaler() -> Row:
    return Row(
        "KEDA external scaler",
        [
            p.timeseries(
                "gRPC calls by method and code",
                "KEDA's calls per second (GetMetrics and IsActive on every polling interval, GetMetricSpec "
                "when it builds the HPA). UNAVAILABLE: source down, stale or no targets, and KEDA's fallback "
                "applies; INVALID_ARGUMENT or NOT_FOUND: a ScaledObject's scalerMetadata is wrong.",
                [a.grpc_calls()],
                p.REQUESTS_PER_SECOND,
                stacked=True,
                width=12,
            ),
            _p50_p99(
                "gRPC call latency",
                "p50 and p99 of unary external scaler calls by "
                "method (served from the same cache as the HTTP API).",
                a.grpc_latency,
                LATENCY_LEVELS,
            ),
        ],
    )


def metrics_source() -> Row:
    return Row(
        "Metrics source",
        [
            _p50_p99(
                "Source query latency",
                "p50 and p99 latency of the adapter's queries to Prometheus (or its scrapes), per source.",
                a.upstream_latency,
                UPSTREAM_LEVELS,
            ),
            p.timeseries(
                "Source errors",
                "Failed source queries per second by outcome (timeout, error).",
                [a.upstream_errors()],
                p.PER_SECOND,
                p.ANY_LEVELS,
                links=[p.runbook("VLLMAutoscaleServingStaleData")],
                width=12,
            ),
        ],
    )


def freshness() -> Row:
    return Row(
        "Freshness",
        [
            p.timeseries(
                "Served sample age p90",
                "Age of the underlying sample when a value was served, p90 per metric. The adapter answers "
                f"503 past max_age ({DEFAULT_MAX_AGE_SECONDS:g} s by default with Prometheus).",
                [a.served_age_quantile(0.9)],
                p.SECONDS,
                AGE_LEVELS,
                links=[p.runbook("VLLMAutoscaleServingStaleData")],
                width=12,
            ),
            p.timeseries(
                "Held sample age",
                "Age now of the oldest sample the adapter holds for each metric's live keys: what it would "
                "serve if the HPA asked this second. Keys nobody asks for drop out.",
                [a.held_sample_age()],
                p.SECONDS,
                AGE_LEVELS,
                width=12,
            ),
        ],
    )


def build() -> p.Dashboard:
    """The adapter-health dashboard."""
    return layout.build(
        layout.ADAPTER,
        "Is the adapter serving the HPA fresh values: request "
        "rate and latency, errors, source latency, cache "
        "and served-sample age.",
        "adapter_health",
        _variables(),
        [at_a_glance(), external_metrics_api(), keda_external_scaler(), metrics_source(), freshness()],
    )


dashboard = build()
