"""Alerts on the vLLM HPAs themselves, from kube-state-metrics: at their cap, or unable to compute."""

from __future__ import annotations

from typing import Final

from adapter.vocabulary.exporters import HPA_CONDITION, HPA_CURRENT, HPA_LABEL, HPA_MAX, HPA_MIN
from adapter.vocabulary.promql.expressions import aggregate, selector
from alerts.contract import Alert
from alerts.params import ParamText

_BY_HPA: Final = ("namespace", HPA_LABEL)
_HPA_BY: Final = ", ".join(_BY_HPA)


def _hpa(name: str, t: ParamText) -> str:
    # kube-state-metrics may run as several replicas: `max by` folds their copies of one HPA.
    return aggregate("max", _BY_HPA, selector(name, [t.hpa_selector]))


def alerts(t: ParamText) -> tuple[Alert, ...]:
    """The HPA alerts, in the order of the runbook."""
    hpa_current = _hpa(HPA_CURRENT, t)
    hpa_max = _hpa(HPA_MAX, t)
    hpa_min = _hpa(HPA_MIN, t)
    scaling_inactive = selector(
        HPA_CONDITION, [t.hpa_selector, 'condition="ScalingActive"', 'status="false"']
    )
    return (
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
                f"{aggregate('max', _BY_HPA, scaling_inactive)} == 1\n"
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
    )
