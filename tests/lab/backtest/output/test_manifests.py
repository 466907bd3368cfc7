"""The recommended policy's objects: an HPA that Kubernetes 1.37 accepts, and KEDA's ScaledObject."""

from __future__ import annotations

import kubernetes_validate  # type: ignore[import-untyped]
import yaml

from lab.backtest.output.manifests import ScaleTarget, adapter_config, deployable, hpa, scaled_object
from lab.backtest.policy import FORECAST, Forecast, Guard, Policy, Saturation
from lab.hpa import Behavior, ScalingPolicy, ScalingRules

TARGET = ScaleTarget(namespace="llm", deployment="vllm-llama", selector="model_name=llama,tier in (a,b)")
INFLIGHT = Policy(
    "inflight-6",
    metric="vllm_requests_inflight",
    target=6.0,
    min_replicas=1,
    max_replicas=12,
    behavior=Behavior(
        scale_down=ScalingRules(stabilization_window_seconds=120, policies=(ScalingPolicy("Pods", 1, 60),))
    ),
)


def test_the_hpa_is_valid_autoscaling_v2_with_the_metric_and_its_selector() -> None:
    document = hpa(INFLIGHT, TARGET)
    kubernetes_validate.validate(document, "1.35.0", strict=True)
    metric = document["spec"]["metrics"][0]["external"]
    assert metric["metric"]["name"] == "vllm_requests_inflight"
    assert metric["metric"]["selector"] == {
        "matchLabels": {"model_name": "llama"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
    }
    assert metric["target"] == {"type": "AverageValue", "averageValue": "6"}
    assert document["spec"]["behavior"]["scaleDown"]["policies"] == [
        {"type": "Pods", "value": 1, "periodSeconds": 60}
    ]


def test_a_value_target_is_written_as_value() -> None:
    policy = Policy(
        "sat", metric="vllm_saturation", target_type="Value", target=1.0, saturation=Saturation(18.5)
    )
    document = hpa(policy, TARGET)
    kubernetes_validate.validate(document, "1.35.0", strict=True)
    assert document["spec"]["metrics"][0]["external"]["target"] == {"type": "Value", "value": "1"}
    assert adapter_config(policy) == {"metrics": {"vllm_saturation": {"capacity": 18.5}}}


def test_the_scaled_object_calls_the_adapters_external_scaler() -> None:
    """docs/keda.md 'Trigger metadata': metric, labelSelector and target in the trigger's metadata."""
    queue = Policy("queue", metric="queue_depth", target=5.0, min_replicas=0, max_replicas=4)
    document = scaled_object(queue, TARGET)
    trigger = document["spec"]["triggers"][0]
    assert trigger["type"] == "external"
    assert trigger["metadata"] == {
        "scalerAddress": "vllm-autoscale.llm.svc:9443",
        "metric": "queue_depth",
        "target": "5",
        "activationTarget": "0",
        "labelSelector": "model_name=llama,tier in (a,b)",
    }
    assert document["spec"]["minReplicaCount"] == 0
    assert yaml.safe_load(yaml.safe_dump(document)) == document


def test_baselines_that_the_adapter_does_not_serve_have_no_manifest() -> None:
    assert deployable(INFLIGHT)
    assert not deployable(Policy("gpu", metric="gpu_utilization", target=80.0))
    assert not deployable(Policy("fixed", kind="fixed", replicas=3))
    assert not deployable(Policy("foresight", kind="foresight"))


def test_the_anticipating_policy_is_one_hpa_with_the_forecast_and_its_guard() -> None:
    """Both metrics in one HPA (the controller takes the larger proposal) and two KEDA triggers; the
    adapter's configuration carries the forecast's horizon and window."""
    policy = Policy(
        "anticipate",
        metric=FORECAST,
        target=1.016,
        forecast=Forecast(horizon=75.0),
        guard=Guard("vllm_requests_inflight", "AverageValue", 16.0),
    )
    document = hpa(policy, TARGET)
    kubernetes_validate.validate(document, "1.35.0", strict=True)
    metrics = [m["external"] for m in document["spec"]["metrics"]]
    assert [m["metric"]["name"] for m in metrics] == [FORECAST, "vllm_requests_inflight"]
    assert [m["target"]["averageValue"] for m in metrics] == ["1.016", "16"]
    triggers = scaled_object(policy, TARGET)["spec"]["triggers"]
    assert [(t["metadata"]["metric"], t["metadata"]["target"]) for t in triggers] == [
        (FORECAST, "1.016"),
        ("vllm_requests_inflight", "16"),
    ]
    assert adapter_config(policy) == {"metrics": {FORECAST: {"horizon": "75s", "window": "60s"}}}
