"""The recording rules and alerts, as data: the one source of the rules file and the Helm copy.

Every tunable (threshold, `for:` duration, selector, the DLQ and queue expressions) is a field of
`alerts.params.Params`. The rules are built from a `ParamText`, each parameter already rendered as the
text the rule carries: its value for `alerts/vllm-autoscale.rules.yaml`, or a Helm lookup for the chart's
copy (`alerts.generate`). Windows are not parameters: recording-rule names state them.

Queries read the catalogue (`adapter.catalogue` through `adapter.promql`) and the vLLM families
(`adapter.vllm`), so the alerts mean what the HPA and the dashboards mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, TypedDict

from adapter import catalogue, vllm
from adapter.catalogue import GaugeSpec, HistogramSpec, MetricDef, Statistic
from adapter.promql import duration, presence_query, value_query
from alerts.params import Params, ParamText, plain_text

RUNBOOK_URL: Final = "https://github.com/vllm-autoscale/vllm-autoscale/blob/main/alerts/runbook.md"
RULES_GROUP: Final = "vllm-autoscale.rules"
ALERTS_GROUP: Final = "vllm-autoscale.alerts"

Severity = Literal["page", "ticket"]

#: recording rules aggregate per model and namespace: the unit an HPA scales and an alert names
LEVEL: Final = ("namespace", vllm.MODEL_LABEL)
_BY: Final = ", ".join(LEVEL)
_HPA_BY: Final = "namespace, horizontalpodautoscaler"

# The TPOT drift compares a recent mean with the model's own mean over the previous day. The last hour
# is left out of the baseline so that a slow degradation does not raise its own baseline as it grows.
TPOT_WINDOW_SECONDS: Final = 600.0
TPOT_BASELINE_WINDOW_SECONDS: Final = 86400.0
TPOT_BASELINE_OFFSET_SECONDS: Final = 3600.0
# Counter rates for preemptions and rejections: long enough to hold several 30 s scrapes.
COUNTER_WINDOW: Final = "5m"
# A DLQ "keeps growing" when it is higher than this long ago, at every evaluation of the `for:`.
DLQ_GROWTH_WINDOW: Final = "30m"
# A backlog is "not draining" when it is no lower, and the replicas no more, than this long ago.
QUEUE_DRAIN_WINDOW: Final = "5m"


@dataclass(frozen=True)
class Recording:
    """A recording rule."""

    record: str
    expr: str


@dataclass(frozen=True)
class Alert:
    """An alerting rule with the full contract: severity, summary, description and runbook link."""

    alert: str
    expr: str
    for_: str
    severity: Severity
    summary: str
    description: str

    @property
    def runbook_url(self) -> str:
        """The runbook section of this alert (the anchor GitHub gives a heading is its lowercased text)."""
        return f"{RUNBOOK_URL}#{self.alert.lower()}"


@dataclass(frozen=True)
class Group:
    """A rule group."""

    name: str
    rules: tuple[Recording | Alert, ...]


class GroupDoc(TypedDict):
    """A rule group as written to YAML; a rule is a mapping because `for` is a Python keyword."""

    name: str
    rules: list[dict[str, object]]


class RulesDoc(TypedDict):
    groups: list[GroupDoc]


def _recorded(metric: MetricDef, operation: str) -> str:
    """`namespace_model_name:<api name>:<operation>`, the recording-rule naming convention."""
    return f"{'_'.join(LEVEL)}:{metric.name}:{operation}"


def _operation(metric: MetricDef) -> str:
    spec = metric.spec
    if isinstance(spec, GaugeSpec):
        return spec.aggregation.value
    assert isinstance(spec, HistogramSpec)
    window = duration(spec.window_seconds)
    if spec.statistic is Statistic.MEAN:
        return f"mean{window}"
    return f"p{spec.quantile * 100:g}_{window}"


def _with_window(metric: MetricDef, seconds: float) -> MetricDef:
    spec = metric.spec
    assert isinstance(spec, HistogramSpec)
    return metric.with_overrides(
        spec=HistogramSpec(spec.family, spec.statistic, seconds, spec.quantile, spec.buckets)
    )


def _counter_rate(family: vllm.Family, window: str, selector: str) -> str:
    """Per-model rate of a counter family (any of its names)."""
    rates = " or ".join(f"rate({name}{{{selector}}}[{window}])" for name in family)
    return f"sum by ({_BY}) ({rates})"


WAITING: Final = catalogue.builtin("vllm_requests_waiting")
RUNNING: Final = catalogue.builtin("vllm_requests_running")
KV_USAGE: Final = catalogue.builtin("vllm_kv_cache_usage")
TTFT: Final = catalogue.builtin("vllm_ttft_seconds")
TPOT_RECENT: Final = _with_window(catalogue.builtin("vllm_tpot_seconds"), TPOT_WINDOW_SECONDS)
TPOT_BASELINE: Final = _with_window(catalogue.builtin("vllm_tpot_seconds"), TPOT_BASELINE_WINDOW_SECONDS)

WAITING_RECORD: Final = _recorded(WAITING, _operation(WAITING))
RUNNING_RECORD: Final = _recorded(RUNNING, _operation(RUNNING))
KV_USAGE_RECORD: Final = _recorded(KV_USAGE, _operation(KV_USAGE))
TTFT_RECORD: Final = _recorded(TTFT, _operation(TTFT))
TPOT_RECORD: Final = _recorded(TPOT_RECENT, _operation(TPOT_RECENT))
TPOT_BASELINE_RECORD: Final = _recorded(
    TPOT_BASELINE, f"{_operation(TPOT_BASELINE)}_offset{duration(TPOT_BASELINE_OFFSET_SECONDS)}"
)
REQUEST_RATE_RECORD: Final = f"{'_'.join(LEVEL)}:vllm_request_success:rate{duration(TPOT_WINDOW_SECONDS)}"
QUEUE_RECORD: Final = "vllm_autoscale:queue_depth"
DLQ_RECORD: Final = "vllm_autoscale:dlq_depth"


def recording_rules(t: ParamText) -> tuple[Recording, ...]:
    """What several alerts and the dashboards share: per-model signals, request rate, queue depths."""
    sel = [t.vllm_selector]
    return (
        Recording(WAITING_RECORD, value_query(WAITING, sel, by=LEVEL)),
        Recording(RUNNING_RECORD, value_query(RUNNING, sel, by=LEVEL)),
        Recording(KV_USAGE_RECORD, value_query(KV_USAGE, sel, by=LEVEL)),
        Recording(TTFT_RECORD, value_query(TTFT, sel, by=LEVEL)),
        Recording(TPOT_RECORD, value_query(TPOT_RECENT, sel, by=LEVEL)),
        Recording(
            TPOT_BASELINE_RECORD,
            value_query(TPOT_BASELINE, sel, by=LEVEL, offset_seconds=TPOT_BASELINE_OFFSET_SECONDS),
        ),
        Recording(
            REQUEST_RATE_RECORD,
            _counter_rate(vllm.REQUEST_SUCCESS, duration(TPOT_WINDOW_SECONDS), t.vllm_selector),
        ),
        Recording(QUEUE_RECORD, t.queue_depth_expr),
        Recording(DLQ_RECORD, t.dlq_depth_expr),
    )


def _tpot_drift(t: ParamText, severity: Severity, ratio: str) -> Alert:
    return Alert(
        alert="VLLMTPOTDrift",
        expr=(
            f"(\n  {TPOT_RECORD}\n/\n  {TPOT_BASELINE_RECORD}\n) > {ratio}\n"
            f"and on ({_BY})\n  {REQUEST_RATE_RECORD} >= {t.tpot_min_request_rate}"
        ),
        for_=t.tpot_for,
        severity=severity,
        summary="Time per output token of a vLLM model has drifted above its own baseline.",
        description=(
            "Mean TPOT of model {{ $labels.model_name }} in namespace {{ $labels.namespace }} over the last "
            '10 minutes is {{ $value | printf "%.2f" }}× its baseline (its mean over the previous day, '
            f"excluding the last hour); the {severity} threshold is {ratio}×."
        ),
    )


def _missing_metrics(t: ParamText) -> str:
    """One branch per series family the adapter reads: a vLLM target that is up but lacks it."""
    families: list[vllm.Family] = []
    for metric in catalogue.BUILTIN:
        if isinstance(metric.spec, GaugeSpec | HistogramSpec):
            families.extend(f for f in catalogue.presence_families(metric.spec) if f not in families)
    branches = []
    for family in families:
        presence = "(" + " or ".join(f"{name}{{{t.vllm_selector}}}" for name in family) + ")"
        branches.append(
            f"label_replace(\n  (up{{{t.vllm_target_selector}}} == 1)\n"
            f"  unless on (job, instance) {presence}\n"
            f"  unless on (job, instance) vllm_autoscale_ready,\n"
            f'  "metric", "{family[0]}", "", ""\n)'
        )
    return "\nor\n".join(branches)


def _hpa(name: str, t: ParamText) -> str:
    return f"max by ({_HPA_BY}) (kube_horizontalpodautoscaler_{name}{{{t.hpa_selector}}})"


def _hpa_replicas(t: ParamText, offset: str = "") -> str:
    """Current replicas of the vLLM HPAs per namespace, now or `offset` ago."""
    at = f" offset {offset}" if offset else ""
    return (
        f"sum by (namespace) (kube_horizontalpodautoscaler_status_current_replicas{{{t.hpa_selector}}}{at})"
    )


def alerting_rules(t: ParamText) -> tuple[Alert, ...]:
    """Every alert, in the order of the runbook."""
    hpa_current = _hpa("status_current_replicas", t)
    hpa_max = _hpa("spec_max_replicas", t)
    hpa_min = _hpa("spec_min_replicas", t)
    scaling_inactive = (
        "kube_horizontalpodautoscaler_status_condition"
        f'{{{t.hpa_selector}, condition="ScalingActive", status="false"}}'
    )
    running = presence_query(RUNNING, [t.vllm_selector])
    return (
        _tpot_drift(t, "ticket", t.tpot_ticket_ratio),
        _tpot_drift(t, "page", t.tpot_page_ratio),
        Alert(
            alert="VLLMTTFTHigh",
            expr=f"{TTFT_RECORD} > {t.ttft_slo_seconds}",
            for_=t.ttft_for,
            severity="page",
            summary="Time to first token of a vLLM model is above its SLO.",
            description=(
                "TTFT p90 of model {{ $labels.model_name }} in namespace {{ $labels.namespace }} is "
                f"{{{{ $value | humanizeDuration }}}} (SLO {t.ttft_slo_seconds}s) for {t.ttft_for}."
            ),
        ),
        Alert(
            alert="VLLMKVCacheNearlyFull",
            expr=f"{KV_USAGE_RECORD} > {t.kv_cache_usage_threshold}",
            for_=t.kv_cache_for,
            severity="ticket",
            summary="The KV cache of a vLLM model is nearly full.",
            description=(
                "Mean KV-cache usage of model {{ $labels.model_name }} in namespace {{ $labels.namespace }} "
                f"is {{{{ $value | humanizePercentage }}}} (threshold {t.kv_cache_usage_threshold}) "
                f"for {t.kv_cache_for}."
            ),
        ),
        Alert(
            alert="VLLMSustainedPreemptions",
            expr=(
                f"{_counter_rate(vllm.NUM_PREEMPTIONS, COUNTER_WINDOW, t.vllm_selector)}"
                f" > {t.preemption_rate_threshold}"
            ),
            for_=t.preemptions_for,
            severity="ticket",
            summary="A vLLM model keeps preempting requests for lack of KV-cache blocks.",
            description=(
                "Model {{ $labels.model_name }} in namespace {{ $labels.namespace }} preempts "
                f'{{{{ $value | printf "%.3g" }}}} requests/s (threshold {t.preemption_rate_threshold}) '
                f"for {t.preemptions_for}."
            ),
        ),
        Alert(
            alert="VLLMRequestsRejected",
            expr=(
                f"{_counter_rate(vllm.ADMISSION_REJECTIONS, COUNTER_WINDOW, t.vllm_selector)}"
                f" > {t.admission_rejection_rate_threshold}"
            ),
            for_=t.admission_rejections_for,
            severity="page",
            summary="vLLM rejects requests with HTTP 503: its admission queue is full.",
            description=(
                "Model {{ $labels.model_name }} in namespace {{ $labels.namespace }} rejects "
                f'{{{{ $value | printf "%.3g" }}}} requests/s (threshold {t.admission_rejection_rate_threshold}) '
                f"for {t.admission_rejections_for}."
            ),
        ),
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
        Alert(
            alert="VLLMHPAAtMaxReplicas",
            expr=(
                f"(\n  {hpa_current}\n  >=\n  {hpa_max}\n)\n"
                f"and on ({_HPA_BY})\n(\n  {hpa_max}\n  >\n  {hpa_min}\n)"
            ),
            for_=t.hpa_max_for,
            severity="ticket",
            summary="An HPA of vLLM runs at its maximum replicas.",
            description=(
                "HPA {{ $labels.namespace }}/{{ $labels.horizontalpodautoscaler }} has run at its maximum of "
                f"{{{{ $value }}}} replicas for {t.hpa_max_for}."
            ),
        ),
        Alert(
            alert="VLLMHPAMetricsUnavailable",
            expr=(
                f"max by ({_HPA_BY}) ({scaling_inactive}) == 1\n"
                f"unless on ({_HPA_BY})\n(\n  {hpa_current} == 0\n"
                f"  and on ({_HPA_BY})\n  {hpa_min} > 0\n)"
            ),
            for_=t.hpa_metrics_unavailable_for,
            severity="page",
            summary="An HPA of vLLM cannot compute its replicas: autoscaling is frozen.",
            description=(
                "HPA {{ $labels.namespace }}/{{ $labels.horizontalpodautoscaler }} has reported "
                f"ScalingActive=False for {t.hpa_metrics_unavailable_for}: it cannot fetch or compute its "
                "metrics, so its replicas stay where they are."
            ),
        ),
        Alert(
            alert="VLLMMetricsMissing",
            expr=_missing_metrics(t),
            for_=t.metrics_missing_for,
            severity="ticket",
            summary="A running vLLM pod does not expose a metric the autoscaler needs.",
            description=(
                "Target {{ $labels.namespace }}/{{ $labels.pod }} ({{ $labels.instance }}) is up but has "
                "not exposed {{ $labels.metric }} for "
                f"{t.metrics_missing_for}: --disable-log-stats, or a vLLM version that renamed it."
            ),
        ),
        Alert(
            alert="VLLMAutoscaleAdapterDown",
            expr=f"sum by (namespace, job) (up{{{t.adapter_selector}}}) == 0\nor\nabsent(up{{{t.adapter_selector}}})",
            for_=t.adapter_down_for,
            severity="page",
            summary="No vllm-autoscale adapter is up: HPAs cannot read their metrics.",
            description=(
                "{{ with $labels.job }}No target of job {{ . }} in namespace {{ $labels.namespace }} is up"
                "{{ else }}Prometheus scrapes no vllm-autoscale adapter target at all{{ end }}, for "
                f"{t.adapter_down_for}: HPAs scaling on external metrics are frozen."
            ),
        ),
        Alert(
            alert="VLLMAutoscaleServingStaleData",
            expr=(
                "label_replace(\n"
                f"  max by (namespace, job, metric) (vllm_autoscale_last_served_sample_age_seconds{{{t.adapter_selector}}})"
                f" > {t.adapter_stale_seconds},\n"
                '  "reason", "old_samples", "", ""\n)\nor\nlabel_replace(\n'
                f"  sum by (namespace, job, metric) (rate(vllm_autoscale_errors_total{{{t.adapter_selector}, "
                f'reason="stale"}}[{COUNTER_WINDOW}])) > 0,\n'
                '  "reason", "stale_refused", "", ""\n)'
            ),
            for_=t.adapter_stale_for,
            severity="ticket",
            summary="The vllm-autoscale adapter serves stale data, or refuses to.",
            description=(
                "The adapter (namespace {{ $labels.namespace }}) "
                '{{ if eq $labels.reason "stale_refused" }}refuses {{ $value | printf "%.3g" }} requests/s '
                "for {{ $labels.metric }} as stale{{ else }}serves {{ $labels.metric }} from samples "
                "{{ $value | humanizeDuration }} old{{ end }} "
                f"(threshold {t.adapter_stale_seconds}s) for {t.adapter_stale_for}."
            ),
        ),
    )


def rule_groups(t: ParamText) -> tuple[Group, ...]:
    """Recording rules first, then alerts (which read the recordings)."""
    return (Group(RULES_GROUP, recording_rules(t)), Group(ALERTS_GROUP, alerting_rules(t)))


def build(params: Params | None = None) -> tuple[Group, ...]:
    """The rule groups with the values of `params` (the shipped defaults when omitted)."""
    return rule_groups(plain_text(params or Params()))


def to_document(groups: tuple[Group, ...]) -> RulesDoc:
    """The Prometheus rule-file structure (also a PrometheusRule's `spec`)."""
    out: list[GroupDoc] = []
    for group in groups:
        rules: list[dict[str, object]] = []
        for rule in group.rules:
            if isinstance(rule, Recording):
                rules.append({"record": rule.record, "expr": rule.expr})
            else:
                rules.append(
                    {
                        "alert": rule.alert,
                        "expr": rule.expr,
                        "for": rule.for_,
                        "labels": {"severity": rule.severity},
                        "annotations": {
                            "summary": rule.summary,
                            "description": rule.description,
                            "runbook_url": rule.runbook_url,
                        },
                    }
                )
        out.append({"name": group.name, "rules": rules})
    return {"groups": out}
