"""Alerts on the vLLM HPAs themselves, from kube-state-metrics: at their cap, or unable to compute."""

from __future__ import annotations

from typing import Final

from alerts.contract import Alert
from alerts.params import ParamText

_HPA_BY: Final = "namespace, horizontalpodautoscaler"


def _hpa(name: str, t: ParamText) -> str:
    # kube-state-metrics may run as several replicas: `max by` folds their copies of one HPA.
    return f"max by ({_HPA_BY}) (kube_horizontalpodautoscaler_{name}{{{t.hpa_selector}}})"


def alerts(t: ParamText) -> tuple[Alert, ...]:
    """The HPA alerts, in the order of the runbook."""
    hpa_current = _hpa("status_current_replicas", t)
    hpa_max = _hpa("spec_max_replicas", t)
    hpa_min = _hpa("spec_min_replicas", t)
    scaling_inactive = (
        "kube_horizontalpodautoscaler_status_condition"
        f'{{{t.hpa_selector}, condition="ScalingActive", status="false"}}'
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
    )
