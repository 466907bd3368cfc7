"""The inference gateway's endpoint picker (llm-d router / Gateway API inference extension EPP): its
flow-control queue, the requests in flight through it, and the saturation that gates dispatch.

The queue and the running requests are the catalogue's `gateway_queue_size` and `gateway_requests_running`
(`adapter.vocabulary.promql.catalogue.value_query`), grouped per pool and priority or per model, so a panel
plots what an HPA on them reads. Names come from `adapter.vocabulary.gateway`.
"""

from __future__ import annotations

from typing import Final

from adapter.vocabulary import gateway
from adapter.vocabulary.catalogue import GATEWAY, MetricDef
from adapter.vocabulary.promql.catalogue import value_query
from adapter.vocabulary.promql.expressions import aggregate, series
from dashboards.queries.grafana import BY_MODEL, MODEL, NAMESPACE, Query, legend, query

BY_POOL_PRIORITY: Final = ("namespace", gateway.POOL_LABEL, "priority")
BY_POOL: Final = ("namespace", gateway.POOL_LABEL)


def _metric(name: str) -> MetricDef:
    return next(metric for metric in GATEWAY if metric.name == name)


def queue_size() -> Query:
    """Requests held in flow control, per pool and priority band (the model variable filters them)."""
    expr = value_query(_metric("gateway_queue_size"), (NAMESPACE, MODEL), by=BY_POOL_PRIORITY)
    return query(expr, legend((gateway.POOL_LABEL,), "priority {{priority}}"))


def requests_running() -> Query:
    """Requests in flight through the gateway, per model."""
    expr = value_query(_metric("gateway_requests_running"), (NAMESPACE, MODEL), by=("namespace", *BY_MODEL))
    return query(expr, legend(BY_MODEL, "through the gateway"))


def pool_saturation() -> Query:
    """The saturation flow control gates dispatch on (`stage="effective"`, 1.0 = the set point)."""
    selected = series(gateway.FLOW_CONTROL_POOL_SATURATION, (NAMESPACE, 'stage="effective"'))
    return query(aggregate("max", BY_POOL, selected), legend((gateway.POOL_LABEL,), "saturation"))
