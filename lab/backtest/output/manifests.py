"""The objects that implement a policy: an autoscaling/v2 HorizontalPodAutoscaler, or a KEDA ScaledObject.

Both read the adapter's metric: the HPA through the external metrics API (`type: External`), KEDA
through the adapter's external scaler (README 'With KEDA': `metric`, `labelSelector`, `target`). A
fixed fleet is a Deployment's `replicas`; the utilisation baseline reads DCGM, not the adapter, and
the foresight bound cannot be deployed: those have no manifest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from adapter.vocabulary import selectors
from lab.backtest.policy import FORECAST, Policy
from lab.hpa import Behavior, ScalingRules


@dataclass(frozen=True)
class ScaleTarget:
    """Where the manifests point: the Deployment, its namespace, the metric's selector, the scaler."""

    namespace: str = "default"
    deployment: str = "vllm"
    selector: str = ""
    """Kubernetes label selector text of the metric (`model_name=llama`)."""
    keda_address: str = ""
    """The adapter's KEDA port; empty: `vllm-autoscale.<namespace>.svc:9443`."""

    @property
    def scaler_address(self) -> str:
        """`scalerAddress` of the ScaledObject's trigger."""
        return self.keda_address or f"vllm-autoscale.{self.namespace}.svc:9443"


def _rules(rules: ScalingRules | None) -> dict[str, Any] | None:
    if rules is None:
        return None
    out: dict[str, Any] = {}
    if rules.stabilization_window_seconds is not None:
        out["stabilizationWindowSeconds"] = rules.stabilization_window_seconds
    if rules.select_policy is not None:
        out["selectPolicy"] = rules.select_policy
    if rules.policies is not None:
        out["policies"] = [
            {"type": p.type, "value": p.value, "periodSeconds": p.period_seconds} for p in rules.policies
        ]
    if rules.tolerance is not None:
        out["tolerance"] = f"{rules.tolerance:g}"
    return out


def behavior_dict(behavior: Behavior | None) -> dict[str, Any] | None:
    """`spec.behavior` as written in a manifest."""
    if behavior is None:
        return None
    out = {"scaleUp": _rules(behavior.scale_up), "scaleDown": _rules(behavior.scale_down)}
    return {k: v for k, v in out.items() if v is not None}


def deployable(policy: Policy) -> bool:
    """Whether the policy has an HPA/KEDA manifest (an HPA on a metric the adapter serves)."""
    return policy.kind == "hpa" and policy.metric != "gpu_utilization"


def _selector(target: ScaleTarget) -> dict[str, Any]:
    """`metric.selector`: matchLabels for equalities, matchExpressions for the rest."""
    parsed = selectors.parse(target.selector)
    labels = parsed.equalities()
    expressions = []
    for requirement in parsed.requirements:
        if requirement.key in labels:
            continue
        operator = {"in": "In", "notin": "NotIn", "!=": "NotIn", "exists": "Exists", "!": "DoesNotExist"}.get(
            requirement.operator.value, "In"
        )
        entry: dict[str, Any] = {"key": requirement.key, "operator": operator}
        if requirement.values and operator in ("In", "NotIn"):
            entry["values"] = list(requirement.values)
        expressions.append(entry)
    out: dict[str, Any] = {}
    if labels:
        out["matchLabels"] = labels
    if expressions:
        out["matchExpressions"] = expressions
    return out


def hpa(policy: Policy, target: ScaleTarget) -> dict[str, Any]:
    """The HorizontalPodAutoscaler of `policy` (its metric, then its guard's: the HPA takes the larger)."""
    selector = _selector(target)
    entries = []
    for external in policy.external_metrics():
        metric: dict[str, Any] = {"name": external.name}
        if selector:
            metric["selector"] = selector
        value_key = "averageValue" if external.target_type == "AverageValue" else "value"
        entries.append(
            {
                "type": "External",
                "external": {
                    "metric": metric,
                    "target": {"type": external.target_type, value_key: external.target},
                },
            }
        )
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target.deployment},
        "minReplicas": policy.min_replicas,
        "maxReplicas": policy.max_replicas,
        "metrics": entries,
    }
    behavior = behavior_dict(policy.behavior)
    if behavior:
        spec["behavior"] = behavior
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": target.deployment, "namespace": target.namespace},
        "spec": spec,
    }


def scaled_object(policy: Policy, target: ScaleTarget) -> dict[str, Any]:
    """The KEDA ScaledObject of `policy`, with the adapter's external scaler as its trigger(s)."""
    triggers = []
    for external in policy.external_metrics():
        metadata: dict[str, Any] = {
            "scalerAddress": target.scaler_address,
            "metric": external.name,
            "target": external.target,
            "activationTarget": "0",
        }
        if target.selector:
            metadata["labelSelector"] = target.selector
        trigger: dict[str, Any] = {
            "type": "external",
            "authenticationRef": {"name": "vllm-autoscale"},
            "metadata": metadata,
        }
        if external.target_type == "Value":
            trigger["metricType"] = "Value"
        triggers.append(trigger)
    spec: dict[str, Any] = {
        "scaleTargetRef": {"name": target.deployment},
        "pollingInterval": round(policy.sync_period),
        "minReplicaCount": policy.min_replicas,
        "maxReplicaCount": policy.max_replicas,
        "cooldownPeriod": round(policy.downscale_stabilization),
        "triggers": triggers,
    }
    behavior = behavior_dict(policy.behavior)
    if behavior:
        spec["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": behavior}}
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": target.deployment, "namespace": target.namespace},
        "spec": spec,
    }


def adapter_config(policy: Policy) -> dict[str, Any] | None:
    """What the adapter's configuration needs for the policy's metrics (`None`: nothing beyond
    defaults): a metric's own settings, and the `smoothing` window of every gauge the HPA reads."""
    metrics: dict[str, dict[str, Any]] = {}
    if policy.metric == "vllm_saturation" and policy.saturation is not None:
        settings: dict[str, Any] = {"capacity": policy.saturation.capacity}
        if policy.saturation.kv_target is not None:
            settings["kv_target"] = policy.saturation.kv_target
        if policy.saturation.queue_target is not None:
            settings["queue_target"] = policy.saturation.queue_target
        metrics["vllm_saturation"] = settings
    elif policy.metric == "queue_depth":
        metrics["queue_depth"] = {"query": "<PromQL of your upstream queue's depth>"}
    elif policy.metric == FORECAST and policy.forecast is not None:
        horizon, window = policy.forecast.horizon, policy.forecast.window
        metrics[FORECAST] = {"horizon": f"{horizon:g}s", "window": f"{window:g}s"}
    if policy.smoothing > 0:
        gauges = [policy.metric] + ([policy.guard.metric] if policy.guard is not None else [])
        # The forecast is a rate over its own window, the upstream queue a user's PromQL: neither
        # is a gauge the adapter averages.
        for name in gauges:
            if name not in (FORECAST, "queue_depth", "gpu_utilization"):
                metrics.setdefault(name, {})["smoothing"] = f"{policy.smoothing:g}s"
    return {"metrics": metrics} if metrics else None


def dump(document: dict[str, Any]) -> str:
    """YAML in the manifest's own key order."""
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
