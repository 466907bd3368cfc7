"""The alerts' recording rules (`alerts.recording`), plotted so that a panel shows what an alert compares.

Recorded series are per (namespace, model) or per queue: the pod variable cannot apply to them.
"""

from __future__ import annotations

from adapter.vocabulary.promql.expressions import aggregate, selector
from alerts import recording
from dashboards.queries.grafana import MODEL, NAMESPACE, QUEUE, Query, query


def queue_variable() -> Query:
    """Upstream queues and dead-letter queues alike, as the recording rules name them."""
    return query(f'label_values({{__name__=~"{recording.QUEUE_RECORD}|{recording.DLQ_RECORD}"}}, queue_name)')


def queue_depth(dlq: bool) -> Query:
    """Messages per upstream queue or dead-letter queue: the depth VLLMQueueBacklogNotDraining and
    VLLMDeadLetterQueue* compare with their thresholds, whatever `prometheusRule.params` reads them from."""
    recorded = selector(recording.DLQ_RECORD if dlq else recording.QUEUE_RECORD, (QUEUE,))
    return query(aggregate("sum", ("queue_name",), recorded), "{{queue_name}}")


def tpot_drift() -> Query:
    """TPOT over its own baseline: exactly what VLLMTPOTDrift compares."""
    recent = selector(recording.TPOT_RECORD, (NAMESPACE, MODEL))
    baseline = selector(recording.TPOT_BASELINE_RECORD, (NAMESPACE, MODEL))
    return query(f"{recent} / {baseline}", "{{model_name}} last 10 min / previous day")
