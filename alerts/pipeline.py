"""Alerts on the metrics pipeline: vLLM pods without the series the adapter reads, the adapter down,
or the adapter serving (or refusing) stale data, from its own `vllm_autoscale_*` metrics."""

from __future__ import annotations

from adapter import telemetry
from adapter.vocabulary import catalogue, vllm
from adapter.vocabulary.catalogue import GaugeSpec, HistogramSpec
from adapter.vocabulary.promql.expressions import aggregate, rate, selector, series
from alerts.contract import Alert
from alerts.params import ParamText
from alerts.serving import COUNTER_WINDOW


def _missing_metrics(t: ParamText) -> str:
    """One branch per series family the adapter reads: a vLLM target that is up but lacks it.

    Per target rather than `absent()`: absent() says nothing once one pod has the series, and vLLM
    pre-creates every engine series at start-up, so a missing one is never "no traffic".
    """
    # One branch per family name: a family read through its breakdown (waiting for capacity) is
    # absent exactly when its plain gauge is, which has a branch of its own.
    families: dict[str, vllm.Family] = {}
    for metric in catalogue.BUILTIN:
        if isinstance(metric.spec, GaugeSpec | HistogramSpec):
            for family in catalogue.presence_families(metric.spec):
                families.setdefault(vllm.family_name(family), family)
    branches = []
    for family in families.values():
        branches.append(
            f"label_replace(\n  ({selector('up', [t.vllm_target_selector])} == 1)\n"
            f"  unless on (job, instance) ({series(family, [t.vllm_selector])})\n"
            f"  unless on (job, instance) {telemetry.READY},\n"
            f'  "metric", "{vllm.family_name(family)}", "", ""\n)'
        )
    return "\nor\n".join(branches)


def alerts(t: ParamText) -> tuple[Alert, ...]:
    """The pipeline alerts, in the order of the runbook."""
    adapter = [t.adapter_selector]
    by_metric = ("namespace", "job", "metric")
    held_age = aggregate("max", by_metric, selector(telemetry.HELD_SAMPLE_AGE, adapter))
    stale = [*adapter, f'reason="{telemetry.STALE_REASON}"']
    stale_refusals = aggregate("sum", by_metric, rate((telemetry.ERRORS,), COUNTER_WINDOW, stale))
    up = selector("up", adapter)
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
            expr=f"{aggregate('sum', ('namespace', 'job'), up)} == 0\nor\nabsent({up})",
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
                f"label_replace(\n  {held_age} > {t.adapter_stale_seconds},\n"
                '  "reason", "old_samples", "", ""\n)\nor\n'
                f"label_replace(\n  {stale_refusals} > 0,\n"
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
