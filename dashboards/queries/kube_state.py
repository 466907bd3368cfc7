"""kube-state-metrics: the HPAs (targets, replicas, scaling events), their Deployments and pending pods.

Series names come from `adapter.vocabulary.exporters`. kube-state-metrics may run as several replicas, so
per-HPA values fold their copies with `max by`.
"""

from __future__ import annotations

from typing import Final

from adapter.vocabulary.catalogue import MetricDef
from adapter.vocabulary.exporters import (
    DEPLOYMENT_READY,
    GPU_RESOURCE,
    HPA_DESIRED,
    HPA_INFO,
    HPA_LABEL,
    HPA_TARGET,
    POD_PHASE,
    POD_REQUESTS,
)
from adapter.vocabulary.promql.expressions import aggregate, selector
from dashboards.queries.grafana import HPA, NAMESPACE, RATE, Query, label_values, query

BY_HPA: Final = (HPA_LABEL,)
#: the legend of a per-HPA series
HPA_LEGEND: Final = "{{" + HPA_LABEL + "}}"


def hpa_variable() -> Query:
    return label_values(HPA_INFO, HPA_LABEL, (NAMESPACE,))


#: KEDA names the metric of the HPA it makes `s<trigger index>-<metric>` (kedacore/keda
#: `pkg/scalers/scaler.go`, GenerateMetricNameWithIndex, v2.x): a target panel matches both spellings
KEDA_INDEX_PREFIX: Final = "(s[0-9]+-)?"


def hpa_target(metric: MetricDef) -> Query:
    """The target the HPAs declare for this external metric, whether an HPA of ours or KEDA's names it."""
    declared = selector(HPA_TARGET, (NAMESPACE, HPA, f'metric_name=~"{KEDA_INDEX_PREFIX}{metric.name}"'))
    return query(
        aggregate("max", (HPA_LABEL, "metric_target_type"), declared),
        f"target {{{{metric_target_type}}}} ({HPA_LEGEND})",
    )


def hpa_replicas(name: str, suffix: str) -> Query:
    """One replica count of each HPA (`name` is an `adapter.vocabulary.exporters.HPA_*` series)."""
    return query(aggregate("max", BY_HPA, selector(name, (NAMESPACE, HPA))), f"{HPA_LEGEND} {suffix}")


def ready_replicas() -> Query:
    """Ready pods of each HPA's Deployment, joined through the HPA's scale target."""
    target = selector(HPA_INFO, (NAMESPACE, HPA, 'scaletargetref_kind="Deployment"'))
    join = f'label_replace({target}, "deployment", "$1", "scaletargetref_name", "(.+)")'
    ready = selector(DEPLOYMENT_READY, (NAMESPACE,))
    joined = f"{ready} * on (namespace, deployment) group_left ({HPA_LABEL}) {join}"
    return query(aggregate("max", BY_HPA, joined), f"{HPA_LEGEND} ready")


def _rescalings() -> str:
    return aggregate("sum", BY_HPA, f"changes({selector(HPA_DESIRED, (NAMESPACE, HPA))}[{RATE}])")


def scaling_events() -> Query:
    """How often each HPA changed its desired replica count."""
    return query(_rescalings(), HPA_LEGEND)


def scaling_annotation() -> Query:
    """Instants at which a desired replica count changed (the dashboard's annotation)."""
    return query(f"{_rescalings()} > 0", f"{HPA_LEGEND} rescaled")


def _pending() -> str:
    phase = selector(POD_PHASE, (NAMESPACE, 'phase="Pending"'))
    return f"({phase} == 1)"


def _gpu_requests() -> str:
    return selector(POD_REQUESTS, (NAMESPACE, f'resource="{GPU_RESOURCE}"'))


def pending_gpu_pods() -> Query:
    """Pods stuck in Pending that request a GPU: a scale-up waiting for capacity."""
    pods = f"{_pending()} and on (namespace, pod) ({_gpu_requests()} > 0)"
    return query(aggregate("count", ("namespace",), pods), "{{namespace}} pending GPU pods")


def pending_gpus() -> Query:
    """GPUs those pods request."""
    gpus = f"{_gpu_requests()} and on (namespace, pod) {_pending()}"
    return query(aggregate("sum", (), gpus), "GPUs requested by pending pods")
