"""Autoscaling: is the HPA doing the right thing, and why.

The per-model row is repeated for each selected model and charts every catalogue metric with the query the
adapter itself sends (`adapter.vocabulary.promql.catalogue.value_query`), next to the targets the HPAs
declare.
"""

from __future__ import annotations

from adapter.vocabulary import catalogue, exporters
from adapter.vocabulary.catalogue import BUILTIN, SATURATION, MetricDef
from dashboards import layout
from dashboards import panels as p
from dashboards.layout import Row
from dashboards.queries import kube_state as k
from dashboards.queries import recorded
from dashboards.queries import vllm_engine as v
from dashboards.queries.grafana import BY_POD

#: AverageValue targets are compared with value ÷ replicas; counts are the metrics that take them
PER_POD_UNITS = frozenset({"requests"})

#: the alert watching each metric's level; every metric's panel also links the HPA-cannot-fetch alert
ALERTS = {
    "vllm_tpot_seconds": "VLLMTPOTDrift",
    "vllm_ttft_seconds": "VLLMTTFTHigh",
    "vllm_kv_cache_usage": "VLLMKVCacheNearlyFull",
}


def _variables() -> list[layout.Variable | layout.TextVariable]:
    return [
        *layout.serving_variables(),
        layout.query_variable("hpa", "HPA", k.hpa_variable()),
        layout.query_variable("queue", "Queue", recorded.queue_variable()),
        # The knee is the adapter's configuration, which no series carries: the viewer types it in.
        layout.TextVariable(
            "capacity",
            "Saturation capacity",
            # NaN until the viewer types the capacity: every value NaN (no line), and the query stays
            # valid PromQL, which `x / ` after an empty box is not
            "NaN",
            "metrics.vllm_saturation.capacity of the adapter: requests in flight per pod at the knee",
        ),
        layout.TextVariable(
            "kv_target",
            "Saturation kv_target",
            "Inf",
            "metrics.vllm_saturation.kv_target of the adapter (Inf: not configured, no KV term)",
        ),
        layout.TextVariable(
            "queue_target",
            "Saturation queue_target",
            "Inf",
            "metrics.vllm_saturation.queue_target of the adapter (Inf: not configured, no queue term)",
        ),
    ]


def _saturation_panel() -> p.Placed:
    return p.timeseries(
        f"{SATURATION} ($model)",
        "Per pod the largest of in-flight requests ÷ capacity, KV usage ÷ kv_target and waiting ÷ "
        "queue_target; the adapter serves the mean over the model's pods, so 1.0 (the red line) means the "
        "model's pods are at the knee `vllm-autoscale profile` measured, and an HPA with a Value target of "
        "1 scales to keep it there. The same query the adapter sends, with its parameters from the "
        "capacity, kv_target and queue_target variables: set them to the adapter's "
        "metrics.vllm_saturation (the panel stays empty while "
        "capacity is NaN, its default; Inf leaves a term "
        "out). "
        "Lines per pod show which pods are past their knee.",
        [v.saturation_value(), v.saturation_value(BY_POD, "{{pod}}"), k.hpa_target(v.SATURATION)],
        p.PLAIN,
        p.SATURATION_LEVELS,
        width=8,
        links=[p.runbook("VLLMHPAMetricsUnavailable")],
    )


#: the forecast's horizon the panel plots: a 15 s sync plus a 60 s cold start (the adapter's own
#: `metrics.vllm_request_rate_forecast.horizon` is the cluster's; the rate itself does not depend on it)
FORECAST_HORIZON = 75.0


def _forecast_panel() -> p.Placed:
    metric = catalogue.forecast(FORECAST_HORIZON)
    now = catalogue.forecast(0.0).with_overrides(name="rate")
    return p.timeseries(
        f"{catalogue.FORECAST} ($model)",
        f"Requests starting per second over {catalogue.FORECAST_WINDOW_SECONDS:g} s, and the forecast the "
        f"adapter serves once metrics.vllm_request_rate_forecast is configured: that rate plus its trend "
        f"carried {FORECAST_HORIZON:g} s ahead (one 15 s sync "
        "plus a 60 s cold start), with the exact query the "
        "adapter sends. An HPA reads it with an AverageValue target at the knee's rate per replica (the "
        "target line compares with the forecast per replica), beside vllm_requests_inflight as its guard. "
        "The forecast above the rate: replicas are being asked for before the load arrives.",
        [
            v.served(metric),
            v.served_per_pod(metric),
            v.served(now)._replace(legend="start rate now"),
            k.hpa_target(metric),
        ],
        p.REQUESTS_PER_SECOND,
        width=8,
        links=[p.runbook("VLLMHPAMetricsUnavailable")],
    )


def _metric_panel(metric: MetricDef) -> p.Placed:
    queries = [v.served(metric)]
    if metric.unit in PER_POD_UNITS:
        queries.append(v.served_per_pod(metric))
    queries.append(k.hpa_target(metric))
    return p.timeseries(
        f"{metric.name} ($model)",
        f"{metric.help} Plotted with the exact query the adapter sends to Prometheus for an HPA selecting "
        "model_name=$model (every pod of the model, whatever the pod variable says), next to the target each "
        "selected HPA declares for this metric (kube-state-metrics). A Value target compares with the served "
        "value, an AverageValue target with the value per replica. Gaps: the adapter would answer 503 (no "
        "value), e.g. a quantile outside the resolved buckets.",
        queries,
        p.CATALOGUE_UNITS[metric.unit],
        maximum=1 if metric.unit == "ratio" else None,
        width=8,
        links=[p.runbook(alert) for alert in (ALERTS.get(metric.name), "VLLMHPAMetricsUnavailable") if alert],
    )


def _annotations() -> list[dict[str, object]]:
    event = k.scaling_annotation()
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


def replicas() -> Row:
    return Row(
        "Replicas",
        [
            p.timeseries(
                "Desired, current and ready replicas",
                "Per HPA: the replica count it wants, the count its target has, the ready pods of its "
                "Deployment, and its bounds. Desired above ready for long: pods cannot start (GPU capacity, "
                "image pull, model load).",
                [
                    k.hpa_replicas(exporters.HPA_DESIRED, "desired"),
                    k.hpa_replicas(exporters.HPA_CURRENT, "current"),
                    k.ready_replicas(),
                    k.hpa_replicas(exporters.HPA_MIN, "min"),
                    k.hpa_replicas(exporters.HPA_MAX, "max"),
                ],
                p.COUNT,
                links=[p.runbook("VLLMHPAAtMaxReplicas"), p.runbook("VLLMNoReadyReplica")],
                width=12,
            ),
            p.timeseries(
                "Scaling events",
                "Changes of each HPA's desired replica count per interval (also shown as annotations).",
                [k.scaling_events()],
                p.COUNT,
                bars=True,
                width=6,
            ),
            p.stat(
                "Pending GPU pods",
                "Pods in phase Pending that request nvidia.com/gpu, and the GPUs they request: a scale-up "
                "waiting for GPU capacity (node pool at max, quota, spot shortage). Not filtered by model or "
                "pod: pending pods expose no vLLM metrics yet.",
                [k.pending_gpu_pods(), k.pending_gpus()],
                p.COUNT,
                p.thresholds((1, "orange")),
                no_value="0",
                links=[p.runbook("VLLMQueueBacklogNotDraining")],
                width=6,
                height=8,
            ),
        ],
    )


def upstream_queue() -> Row:
    return Row(
        "Upstream queue",
        [
            p.timeseries(
                "Queue depth",
                "Messages per upstream queue, as the alerts' recording rule vllm_autoscale:queue_depth reads "
                "them (by default the CloudWatch exporter's SQS depth, which lags by minutes). Dead-letter "
                "queues are shown apart.",
                [recorded.queue_depth(dlq=False)],
                p.COUNT,
                p.QUEUE_BACKLOG_LEVELS,
                links=[p.runbook("VLLMQueueBacklogNotDraining")],
                width=12,
            ),
            p.timeseries(
                "Dead-letter queue depth",
                "Messages per dead-letter queue, as the alerts' "
                "recording rule vllm_autoscale:dlq_depth reads "
                "them (by default SQS queues whose name ends in -dlq, _dlq or .dlq, in any case, .fifo "
                f"allowed). Above {p.ALERT_DEFAULTS.dlq_depth_threshold:g} for a while pages on-call.",
                [recorded.queue_depth(dlq=True)],
                p.COUNT,
                p.DLQ_LEVELS,
                links=[
                    p.runbook("VLLMDeadLetterQueueDepthHigh"),
                    p.runbook("VLLMDeadLetterQueueGrowing"),
                ],
                width=12,
            ),
        ],
    )


def what_the_hpa_sees() -> Row:
    inflight = p.timeseries(
        "In flight per pod ($model)",
        "Running plus waiting requests per selected pod: uneven lines mean the load balancer, not the "
        "autoscaler, is the problem.",
        [v.inflight_per_pod()],
        p.COUNT,
        width=8,
    )
    return Row(
        "What the HPA sees: $model",
        [*(_metric_panel(metric) for metric in BUILTIN), _saturation_panel(), _forecast_panel(), inflight],
        repeat="model",
    )


def build() -> p.Dashboard:
    """The autoscaling dashboard."""
    return layout.build(
        layout.AUTOSCALING,
        "Is autoscaling doing the right thing: what the HPA sees next to its targets, replicas, pending GPU "
        "pods and the upstream queue.",
        "autoscaling",
        _variables(),
        [replicas(), upstream_queue(), what_the_hpa_sees()],
        _annotations(),
    )


dashboard = build()
