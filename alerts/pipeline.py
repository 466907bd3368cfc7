"""Alerts on the metrics pipeline: vLLM pods without the series the adapter reads, the adapter down,
or the adapter serving (or refusing) stale data, from its own `vllm_autoscale_*` metrics."""

from __future__ import annotations

from adapter import catalogue, vllm
from adapter.catalogue import GaugeSpec, HistogramSpec
from alerts.contract import Alert
from alerts.params import ParamText
from alerts.serving import COUNTER_WINDOW


def _missing_metrics(t: ParamText) -> str:
    """One branch per series family the adapter reads: a vLLM target that is up but lacks it.

    Per target rather than `absent()`: absent() says nothing once one pod has the series, and vLLM
    pre-creates every engine series at start-up, so a missing one is never "no traffic".
    """
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


def alerts(t: ParamText) -> tuple[Alert, ...]:
    """The pipeline alerts, in the order of the runbook."""
    return (
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
            # `absent` covers "Prometheus scrapes no adapter at all"; it carries no labels then.
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
                f"  max by (namespace, job, metric) (vllm_autoscale_held_sample_age_seconds{{{t.adapter_selector}}})"
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
