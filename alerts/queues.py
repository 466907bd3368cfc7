"""Alerts on the upstream request queue and its dead-letter queue: requests lost, or not served.

The depths are the recording rules `vllm_autoscale:dlq_depth` and `vllm_autoscale:queue_depth`, whose
expressions are parameters (SQS through the CloudWatch exporter by default, anything else by override).
A queue belongs to the vLLM workloads of its namespace (`queue_depth_expr` must carry `namespace`); the
workloads are the Deployments the vLLM HPAs scale, found through kube-state-metrics' HPA info, so the
adapter's own Deployment never counts as a ready replica.
"""

from __future__ import annotations

from typing import Final

from adapter.vocabulary import catalogue, gateway
from adapter.vocabulary.exporters import DEPLOYMENT_READY, HPA_CURRENT, HPA_INFO
from adapter.vocabulary.promql.catalogue import value_query
from adapter.vocabulary.promql.expressions import aggregate, selector
from alerts.contract import Alert
from alerts.params import ParamText
from alerts.recording import DLQ_RECORD, QUEUE_RECORD

# A DLQ "keeps growing" when it is higher than this long ago, at every evaluation of the `for:`.
DLQ_GROWTH_WINDOW: Final = "30m"
# A backlog is "not draining" when it is no lower, and the replicas no more, than this long ago.
QUEUE_DRAIN_WINDOW: Final = "5m"
# A workload of kube-state-metrics: its Deployment series carry these labels.
_WORKLOAD: Final = ("namespace", "deployment")
_WORKLOAD_BY: Final = ", ".join(_WORKLOAD)


def _hpa_replicas(t: ParamText, offset: str = "") -> str:
    """Current replicas of the vLLM HPAs per namespace, now or `offset` ago."""
    at = f" offset {offset}" if offset else ""
    return aggregate("sum", ("namespace",), selector(HPA_CURRENT, [t.hpa_selector]) + at)


def _ready_workload_replicas(t: ParamText) -> str:
    """Ready replicas per namespace of the Deployments the vLLM HPAs scale (kube-state-metrics).

    KEDA's HPAs count too: a ScaledObject's HPA targets the same Deployment. `max by` folds the copies
    that several kube-state-metrics replicas export.
    """
    target = selector(HPA_INFO, [t.hpa_selector, 'scaletargetref_kind="Deployment"'])
    workloads = aggregate(
        "max", _WORKLOAD, f'label_replace({target}, "deployment", "$1", "scaletargetref_name", "(.+)")'
    )
    ready = aggregate("max", _WORKLOAD, selector(DEPLOYMENT_READY))
    return aggregate("sum", ("namespace",), f"\n    {ready}\n    * on ({_WORKLOAD_BY})\n    {workloads}\n  ")


#: the gateway queue per pool, as `gateway_queue_size` reads it with `inference_pool=<pool>`
_GATEWAY_QUEUE: Final = next(m for m in catalogue.GATEWAY if m.name == "gateway_queue_size")


def alerts(t: ParamText) -> tuple[Alert, ...]:
    """The queue alerts, in the order of the runbook."""
    return (
        Alert(
            alert="VLLMDeadLetterQueueDepthHigh",
            expr=f"{DLQ_RECORD} > {t.dlq_depth_threshold}",
            for_=t.dlq_depth_for,
            severity="page",
            summary="A dead-letter queue holds requests that failed for good.",
            description=(
                "Dead-letter queue {{ $labels.queue_name }} (namespace {{ $labels.namespace }}) holds "
                f"{{{{ $value | humanize }}}} messages (threshold "
                f"{t.dlq_depth_threshold}) for {t.dlq_depth_for}."
            ),
        ),
        Alert(
            alert="VLLMDeadLetterQueueGrowing",
            expr=f"delta({DLQ_RECORD}[{DLQ_GROWTH_WINDOW}]) > 0",
            for_=t.dlq_growth_for,
            severity="ticket",
            summary="A dead-letter queue keeps growing.",
            description=(
                "Dead-letter queue {{ $labels.queue_name }} (namespace {{ $labels.namespace }}) grew by "
                f"{{{{ $value | humanize }}}} messages in {DLQ_GROWTH_WINDOW}, and has kept growing for "
                f"{t.dlq_growth_for}."
            ),
        ),
        Alert(
            alert="VLLMQueueBacklogNotDraining",
            expr=(
                f"(\n  {QUEUE_RECORD} > {t.queue_backlog_threshold}\n"
                f"  and\n  delta({QUEUE_RECORD}[{QUEUE_DRAIN_WINDOW}]) >= 0\n)\n"
                f"unless on (namespace)\n(\n  {_hpa_replicas(t)}\n"
                f"  >\n  {_hpa_replicas(t, QUEUE_DRAIN_WINDOW)}\n)"
            ),
            for_=t.queue_backlog_for,
            severity="page",
            summary="An upstream request queue is not draining and the vLLM replicas are not growing.",
            description=(
                "Queue {{ $labels.queue_name }} (namespace {{ $labels.namespace }}) holds "
                f"{{{{ $value | humanize }}}} messages (threshold {t.queue_backlog_threshold}), has not "
                f"shrunk and the HPA replicas have not grown for {t.queue_backlog_for}."
            ),
        ),
        Alert(
            alert="VLLMNoReadyReplica",
            expr=(f"{QUEUE_RECORD} > 0\nand on (namespace)\n(\n  {_ready_workload_replicas(t)} == 0\n)"),
            for_=t.no_ready_replica_for,
            severity="page",
            summary="Requests wait upstream while no vLLM replica is ready, for longer than a cold start.",
            description=(
                "Queue {{ $labels.queue_name }} (namespace {{ $labels.namespace }}) holds "
                "{{ $value | humanize }} messages while the vLLM Deployments the namespace's HPAs scale "
                f"have had no ready replica for {t.no_ready_replica_for}: the wake-up is stuck."
            ),
        ),
        Alert(
            alert="VLLMGatewayQueueBacklog",
            expr=(
                f"{value_query(_GATEWAY_QUEUE, [], by=('namespace', gateway.POOL_LABEL))}\n"
                f"> {t.gateway_queue_threshold}"
            ),
            for_=t.gateway_queue_for,
            severity="page",
            summary="Requests wait in the inference gateway's queue, where vLLM's metrics do not see them.",
            description=(
                "Inference pool {{ $labels.inference_pool }} (namespace {{ $labels.namespace }}) holds "
                "{{ $value | humanize }} requests in its endpoint picker's flow-control queue "
                f"(threshold {t.gateway_queue_threshold}) for {t.gateway_queue_for}: the pool is short of "
                "capacity, and an autoscaler reading only vLLM's waiting requests will not add any."
            ),
        ),
    )
