"""The adapter's own metrics, by the series names `adapter.telemetry` exports.

Its variables select the adapter's namespace and pods (not the models') and the external metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from adapter import telemetry
from adapter.vocabulary.promql.expressions import aggregate, histogram_quantile, rate, selector
from dashboards.queries.grafana import (
    ADAPTER_METRIC,
    NAMESPACE,
    POD,
    RATE,
    Query,
    label_values,
    legend,
    query,
)

#: the adapter's own pods (its namespace, not the models')
ADAPTER: Final = (NAMESPACE, POD)


def namespace_variable() -> Query:
    return label_values(telemetry.READY, "namespace")


def pod_variable() -> Query:
    return label_values(telemetry.READY, "pod", (NAMESPACE,))


def metric_variable() -> Query:
    return label_values(telemetry.REQUESTS, "metric", (NAMESPACE,))


def _rate(name: str, labels: Sequence[str], extra: Sequence[str] = ()) -> str:
    return aggregate("sum", labels, rate((name,), RATE, (*ADAPTER, *extra)))


def _quantile(name: str, q: float, labels: Sequence[str], extra: Sequence[str] = ()) -> str:
    return histogram_quantile(q, (name,), RATE, (*ADAPTER, *extra), labels)


def requests(labels: Sequence[str]) -> Query:
    return query(_rate(telemetry.REQUESTS, labels, (ADAPTER_METRIC,)), legend(labels))


def error_ratio() -> Query:
    """Share of external-metrics answers that were not 2xx (the HPA freezes on those)."""
    failed = _rate(telemetry.REQUESTS, (), (ADAPTER_METRIC, 'code!~"2.."'))
    total = _rate(telemetry.REQUESTS, (), (ADAPTER_METRIC,))
    return query(f"{failed} / {total}", "non-2xx share")


def errors() -> Query:
    return query(_rate(telemetry.ERRORS, ("metric", "reason"), (ADAPTER_METRIC,)), "{{metric}} {{reason}}")


def latency(q: float) -> Query:
    return query(_quantile(telemetry.REQUEST_SECONDS, q, (), (ADAPTER_METRIC,)), f"p{q * 100:g}")


def grpc_calls() -> Query:
    """KEDA external scaler calls per second by gRPC method and status code."""
    return query(_rate(telemetry.GRPC_CALLS, ("method", "code")), "{{method}} {{code}}")


def grpc_latency(q: float) -> Query:
    return query(_quantile(telemetry.GRPC_SECONDS, q, ("method",)), f"{{{{method}}}} p{q * 100:g}")


def upstream_latency(q: float) -> Query:
    return query(_quantile(telemetry.UPSTREAM_SECONDS, q, ("source",)), f"{{{{source}}}} p{q * 100:g}")


def upstream_errors() -> Query:
    return query(_rate(telemetry.UPSTREAM_ERRORS, ("source", "outcome")), "{{source}} {{outcome}}")


def cache_hit_ratio() -> Query:
    hits = _rate(telemetry.CACHE_HITS, ())
    misses = _rate(telemetry.CACHE_MISSES, ())
    return query(f"{hits} / ({hits} + {misses})", "hit ratio")


def cache_keys() -> Query:
    return query(aggregate("sum", ("pod",), selector(telemetry.CACHE_KEYS, ADAPTER)), "{{pod}} keys")


def served_age_quantile(q: float) -> Query:
    expr = _quantile(telemetry.SERVED_SAMPLE_AGE, q, ("metric",), (ADAPTER_METRIC,))
    return query(expr, f"{{{{metric}}}} p{q * 100:g}")


def held_sample_age() -> Query:
    held = selector(telemetry.HELD_SAMPLE_AGE, (*ADAPTER, ADAPTER_METRIC))
    return query(aggregate("max", ("metric",), held), "{{metric}}")


def ready() -> Query:
    return query(aggregate("sum", (), selector(telemetry.READY, ADAPTER)), "ready")


def replicas() -> Query:
    return query(aggregate("count", (), selector(telemetry.READY, ADAPTER)), "replicas")
