"""Autoscaling: is the HPA doing the right thing, and why.

The per-model row is repeated for each selected model and charts every catalogue metric with the
query the adapter itself sends (`adapter.promql.value_query`), next to the targets the HPAs declare.
"""

from __future__ import annotations

from adapter.catalogue import BUILTIN, MetricDef
from dashboards import panels as p
from dashboards import queries as q

#: AverageValue targets are compared with value ÷ replicas; counts are the metrics that take them
PER_POD_UNITS = frozenset({"requests"})

#: the alert watching each metric's level; every metric's panel also links the HPA-cannot-fetch alert
ALERTS = {
    "vllm_tpot_seconds": "VLLMTPOTDrift",
    "vllm_ttft_seconds": "VLLMTTFTHigh",
    "vllm_kv_cache_usage": "VLLMKVCacheNearlyFull",
}


def _variables() -> list[p.Variable]:
    return [
        p.query_variable("namespace", "Namespace", q.namespace_variable()),
        p.query_variable("model", "Model", q.model_variable()),
        p.query_variable("pod", "Pod", q.pod_variable()),
        p.query_variable("hpa", "HPA", q.hpa_variable()),
        p.query_variable("queue", "Queue", q.queue_variable()),
    ]


def _metric_panel(metric: MetricDef) -> p.Panel:
    queries = [q.served(metric)]
    if metric.unit in PER_POD_UNITS:
        queries.append(q.served_per_pod(metric))
    queries.append(q.hpa_target(metric))
    return p.timeseries(
        f"{metric.name} ($model)",
        f"{metric.help} Plotted with the exact query the adapter sends to Prometheus for an HPA selecting "
        "model_name=$model (every pod of the model, whatever the pod variable says), next to the target each "
        "selected HPA declares for this metric (kube-state-metrics). A Value target compares with the served "
        "value, an AverageValue target with the value per replica. Gaps: the adapter would answer 503 (no "
        "value), e.g. a quantile outside the resolved buckets.",
        queries,
        p.CATALOGUE_UNITS[metric.unit],
        minimum=0,
        maximum=1 if metric.unit == "ratio" else None,
        links=[p.runbook(alert) for alert in (ALERTS.get(metric.name), "VLLMHPAMetricsUnavailable") if alert],
    )


def _annotations() -> list[dict[str, object]]:
    event = q.scaling_annotation()
    return [
        {
            "datasource": p.DATASOURCE,
            "enable": True,
            "expr": event.expr,
            "iconColor": "orange",
            "name": "Scaling events",
            "titleFormat": event.legend,
            "useValueForTime": False,
        }
    ]


def build() -> p.Dashboard:
    """The autoscaling dashboard."""
    grid = p.Grid()
    grid.row("Replicas")
    grid.add(
        p.timeseries(
            "Desired, current and ready replicas",
            "Per HPA: the replica count it wants, the count its target has, the ready pods of its Deployment, and "
            "its bounds. Desired above ready for long: pods cannot start (GPU capacity, image pull, model load).",
            [
                q.hpa_replicas(q.HPA_DESIRED, "desired"),
                q.hpa_replicas(q.HPA_CURRENT, "current"),
                q.ready_replicas(),
                q.hpa_replicas(q.HPA_MIN, "min"),
                q.hpa_replicas(q.HPA_MAX, "max"),
            ],
            p.COUNT,
            minimum=0,
            links=[p.runbook("VLLMHPAAtMaxReplicas"), p.runbook("VLLMNoReadyReplica")],
        ),
        12,
    )
    grid.add(
        p.timeseries(
            "Scaling events",
            "Changes of each HPA's desired replica count per interval (also shown as annotations).",
            [q.scaling_events()],
            p.COUNT,
            minimum=0,
            bars=True,
        ),
        6,
    )
    grid.add(
        p.stat(
            "Pending GPU pods",
            "Pods in phase Pending that request nvidia.com/gpu, and the GPUs they request: a scale-up waiting for "
            "GPU capacity (node pool at max, quota, spot shortage). Not filtered by model or pod: pending pods "
            "expose no vLLM metrics yet.",
            [q.pending_gpu_pods(), q.pending_gpus()],
            p.COUNT,
            p.thresholds((1, "orange")),
            no_value="0",
            links=[p.runbook("VLLMQueueBacklogNotDraining")],
        ),
        6,
    )

    grid.row("Upstream queue")
    grid.add(
        p.timeseries(
            "Queue depth",
            "Messages per upstream queue, as the alerts' recording rule vllm_autoscale:queue_depth reads them "
            "(by default the CloudWatch exporter's SQS depth, which lags by minutes). Dead-letter queues are "
            "shown apart.",
            [q.queue_depth(dlq=False)],
            p.COUNT,
            p.QUEUE_BACKLOG_LEVELS,
            minimum=0,
            links=[p.runbook("VLLMQueueBacklogNotDraining")],
        ),
        12,
    )
    grid.add(
        p.timeseries(
            "Dead-letter queue depth",
            "Messages per dead-letter queue, as the alerts' recording rule vllm_autoscale:dlq_depth reads them "
            "(by default SQS queues whose name ends in -dlq, _dlq or .dlq, in any case, .fifo allowed). Above "
            f"{q.ALERT_DEFAULTS.dlq_depth_threshold:g} for a while pages on-call.",
            [q.queue_depth(dlq=True)],
            p.COUNT,
            p.DLQ_LEVELS,
            minimum=0,
            links=[p.runbook("VLLMDeadLetterQueueDepthHigh"), p.runbook("VLLMDeadLetterQueueGrowing")],
        ),
        12,
    )

    grid.row("What the HPA sees: $model", repeat="model")
    for metric in BUILTIN:
        grid.add(_metric_panel(metric), 8)
    grid.add(
        p.timeseries(
            "In flight per pod ($model)",
            "Running plus waiting requests per selected pod: uneven lines mean the load balancer, not the "
            "autoscaler, is the problem.",
            [q.inflight_per_pod()],
            p.COUNT,
            minimum=0,
        ),
        8,
    )
    return p.build(
        p.AUTOSCALING,
        "Is autoscaling doing the right thing: what the HPA sees next to its targets, replicas, pending GPU "
        "pods and the upstream queue.",
        "autoscaling",
        _variables(),
        grid,
        _annotations(),
    )


dashboard = build()
