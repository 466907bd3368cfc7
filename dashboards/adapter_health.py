"""Health of the vllm-autoscale adapter itself, from its own `vllm_autoscale_*` metrics.

Its variables select the adapter's namespace and pods (not the models'), and which external metric.
"""

from __future__ import annotations

from adapter.config import PrometheusSettings
from dashboards import panels as p
from dashboards import queries as q

#: a source query slower than the default timeout is an error, never a value
UPSTREAM_LEVELS = p.thresholds(
    (PrometheusSettings().timeout / 2, "orange"), (PrometheusSettings().timeout, "red")
)
#: orange where the stale-data alert starts counting; red past max_age, where the adapter answers 503
AGE_LEVELS = p.thresholds(
    (q.ALERT_DEFAULTS.adapter_stale_seconds, "orange"), (q.DEFAULT_MAX_AGE_SECONDS, "red")
)
#: the HPA controller syncs every 15 s and the aggregator times out long before; answers are cached, so
#: anything past a quarter second means first fetches are waiting on the source
LATENCY_LEVELS = p.thresholds((0.25, "orange"), (1.0, "red"))


def _variables() -> list[p.Variable]:
    return [
        p.query_variable("namespace", "Adapter namespace", q.adapter_namespace_variable()),
        p.query_variable("pod", "Adapter pod", q.adapter_pod_variable()),
        p.query_variable("metric", "External metric", q.adapter_metric_variable()),
    ]


def build() -> p.Dashboard:
    """The adapter-health dashboard."""
    grid = p.Grid()
    grid.row("At a glance")
    grid.add(
        p.stat(
            "Ready replicas",
            "Adapter pods whose metrics source has answered at least once, and all adapter pods.",
            [q.adapter_ready(), q.adapter_replicas()],
            p.COUNT,
            p.thresholds((1, "green"), base="red"),
            links=[p.runbook("VLLMAutoscaleAdapterDown")],
        ),
        6,
        4,
    )
    grid.add(
        p.stat(
            "Non-2xx answers",
            "Share of external-metrics answers that were errors: the HPA freezes the model's scale on each one.",
            [q.adapter_error_ratio()],
            p.RATIO,
            p.FAILED_LEVELS,
            links=[p.runbook("VLLMHPAMetricsUnavailable")],
        ),
        6,
        4,
    )
    grid.add(
        p.stat(
            "Cache hit ratio",
            "Answers served from memory / all answers. Misses wait for a first fetch of their key.",
            [q.cache_hit_ratio()],
            p.RATIO,
            p.thresholds((0.9, "green"), base="orange"),
        ),
        6,
        4,
    )
    grid.add(
        p.stat(
            "Cached keys",
            "(metric, namespace, selector) keys refreshed in the background, per pod.",
            [q.cache_keys()],
            p.COUNT,
        ),
        6,
        4,
    )

    grid.row("External metrics API")
    grid.add(
        p.timeseries(
            "Requests by metric",
            "External-metrics requests per second by metric (the HPA asks every 15 s per metric and HPA).",
            [q.adapter_requests(("metric",))],
            p.REQUESTS_PER_SECOND,
            minimum=0,
        ),
        12,
    )
    grid.add(
        p.timeseries(
            "Requests by HTTP code",
            "503: source down, stale or no targets; 404: unknown metric; 400: bad selector; 401/403: auth.",
            [q.adapter_requests(("code",))],
            p.REQUESTS_PER_SECOND,
            minimum=0,
            stacked=True,
        ),
        12,
    )
    grid.add(
        p.timeseries(
            "Request latency",
            "p50 and p99 of external-metrics request latency. Cached answers take well under a millisecond.",
            [q.adapter_latency(0.5), q.adapter_latency(0.99)],
            p.SECONDS,
            LATENCY_LEVELS,
            minimum=0,
        ),
        12,
    )
    grid.add(
        p.timeseries(
            "Errors by reason",
            "Error answers per second by metric and reason (stale, source_unavailable, ...).",
            [q.adapter_errors()],
            p.REQUESTS_PER_SECOND,
            p.ANY_LEVELS,
            minimum=0,
            links=[p.runbook("VLLMHPAMetricsUnavailable"), p.runbook("VLLMAutoscaleServingStaleData")],
        ),
        12,
    )

    grid.row("KEDA external scaler")
    grid.add(
        p.timeseries(
            "gRPC calls by method and code",
            "KEDA's calls per second (GetMetrics and IsActive on every polling interval, GetMetricSpec when it "
            "builds the HPA). UNAVAILABLE: source down, stale or no targets, and KEDA's fallback applies; "
            "INVALID_ARGUMENT or NOT_FOUND: a ScaledObject's scalerMetadata is wrong.",
            [q.grpc_calls()],
            p.REQUESTS_PER_SECOND,
            minimum=0,
            stacked=True,
        ),
        12,
    )
    grid.add(
        p.timeseries(
            "gRPC call latency",
            "p50 and p99 of unary external scaler calls by method (served from the same cache as the HTTP API).",
            [q.grpc_latency(0.5), q.grpc_latency(0.99)],
            p.SECONDS,
            LATENCY_LEVELS,
            minimum=0,
        ),
        12,
    )

    grid.row("Metrics source")
    grid.add(
        p.timeseries(
            "Source query latency",
            "p50 and p99 latency of the adapter's queries to Prometheus (or its scrapes), per source.",
            [q.upstream_latency(0.5), q.upstream_latency(0.99)],
            p.SECONDS,
            UPSTREAM_LEVELS,
            minimum=0,
        ),
        12,
    )
    grid.add(
        p.timeseries(
            "Source errors",
            "Failed source queries per second by outcome (timeout, error).",
            [q.upstream_errors()],
            p.PER_SECOND,
            p.ANY_LEVELS,
            minimum=0,
            links=[p.runbook("VLLMAutoscaleServingStaleData")],
        ),
        12,
    )

    grid.row("Freshness")
    grid.add(
        p.timeseries(
            "Served sample age p90",
            "Age of the underlying sample when a value was served, p90 per metric. The adapter answers 503 past "
            f"max_age ({q.DEFAULT_MAX_AGE_SECONDS:g} s by default with Prometheus).",
            [q.served_age_quantile(0.9)],
            p.SECONDS,
            AGE_LEVELS,
            minimum=0,
            links=[p.runbook("VLLMAutoscaleServingStaleData")],
        ),
        12,
    )
    grid.add(
        p.timeseries(
            "Held sample age",
            "Age now of the oldest sample the adapter holds for each metric's live keys: what it would serve "
            "if the HPA asked this second. Keys nobody asks for drop out.",
            [q.held_sample_age()],
            p.SECONDS,
            AGE_LEVELS,
            minimum=0,
        ),
        12,
    )
    return p.build(
        p.ADAPTER,
        "Is the adapter serving the HPA fresh values: request rate and latency, errors, source latency, cache "
        "and served-sample age.",
        "adapter_health",
        _variables(),
        grid,
    )


dashboard = build()
