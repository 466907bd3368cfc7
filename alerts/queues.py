"""Alerts on the upstream request queue and its dead-letter queue: requests lost, or not served.

The depths are the recording rules `vllm_autoscale:dlq_depth` and `vllm_autoscale:queue_depth`, whose
expressions are parameters (SQS through the CloudWatch exporter by default, anything else by override).
"""

from __future__ import annotations

from typing import Final

from adapter.exporters import HPA_CURRENT
from adapter.promql import aggregate, presence_query, selector
from alerts.contract import Alert
from alerts.params import ParamText
from alerts.recording import DLQ_RECORD, QUEUE_RECORD, RUNNING

# A DLQ "keeps growing" when it is higher than this long ago, at every evaluation of the `for:`.
DLQ_GROWTH_WINDOW: Final = "30m"
# A backlog is "not draining" when it is no lower, and the replicas no more, than this long ago.
QUEUE_DRAIN_WINDOW: Final = "5m"


def _hpa_replicas(t: ParamText, offset: str = "") -> str:
    """Current replicas of the vLLM HPAs per namespace, now or `offset` ago."""
    at = f" offset {offset}" if offset else ""
    return aggregate("sum", ("namespace",), selector(HPA_CURRENT, [t.hpa_selector]) + at)


def alerts(t: ParamText) -> tuple[Alert, ...]:
    """The queue alerts, in the order of the runbook."""
    running = presence_query(RUNNING, [t.vllm_selector])
    return (
        Alert(
            alert="VLLMDeadLetterQueueDepthHigh",
            expr=f"{DLQ_RECORD} > {t.dlq_depth_threshold}",
            for_=t.dlq_depth_for,
            severity="page",
            summary="A dead-letter queue holds requests that failed for good.",
            description=(
                "Dead-letter queue {{ $labels.queue_name }} (namespace {{ $labels.namespace }}) holds "
                f"{{{{ $value | humanize }}}} messages (threshold {t.dlq_depth_threshold}) for {t.dlq_depth_for}."
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
            expr=f"{QUEUE_RECORD} > 0\nunless on (namespace)\n  count by (namespace) {running}",
            for_=t.no_ready_replica_for,
            severity="page",
            summary="Requests wait upstream while no vLLM replica is serving.",
            description=(
                "Queue {{ $labels.queue_name }} (namespace {{ $labels.namespace }}) holds "
                "{{ $value | humanize }} messages while no vLLM replica in the namespace reports metrics, "
                f"for {t.no_ready_replica_for}."
            ),
        ),
    )
