"""templates/keda-scaledobject-vllm.yaml: with `autoscaler: keda`, one KEDA ScaledObject per model whose
external triggers ask the adapter's gRPC port what the chart's HPA would ask its APIService.

kubernetes-validate skips CRDs, so `scaled_object_shape` checks each ScaledObject against the shape of
KEDA's `keda.sh/v1alpha1` CRD (field names, required fields, types), and every trigger's metadata goes
through the adapter's own `scalerMetadata` parser.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from adapter.keda import metadata as scaler_metadata
from tests.helm.conftest import ADAPTER, NAMESPACE, ONE_MODEL, Doc, HelmResult, Rendered, render, render_many

SCENARIO = "keda-scaler"
LLAMA = "demo-vllm-autoscale-llama-8b"
BATCH = "demo-vllm-autoscale-batch-llm"
INT32 = 2**31 - 1

# The shape of KEDA's ScaledObject CRD (keda.sh/v1alpha1), field by field.
SPEC_FIELDS = {
    "scaleTargetRef",
    "pollingInterval",
    "cooldownPeriod",
    "initialCooldownPeriod",
    "idleReplicaCount",
    "minReplicaCount",
    "maxReplicaCount",
    "fallback",
    "advanced",
    "triggers",
}
INT_FIELDS = (
    "pollingInterval",
    "cooldownPeriod",
    "initialCooldownPeriod",
    "idleReplicaCount",
    "minReplicaCount",
    "maxReplicaCount",
)
TARGET_REF_FIELDS = {"apiVersion", "kind", "name", "envSourceContainerName"}
FALLBACK_BEHAVIORS = {"static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"}
ADVANCED_FIELDS = {"horizontalPodAutoscalerConfig", "restoreToOriginalReplicaCount", "scalingModifiers"}
HPA_CONFIG_FIELDS = {"name", "behavior"}
RULES_FIELDS = {"stabilizationWindowSeconds", "selectPolicy", "policies", "tolerance"}
TRIGGER_FIELDS = {"type", "name", "metadata", "authenticationRef", "metricType", "useCachedMetrics"}
METRIC_TYPES = {"AverageValue", "Value", "Utilization"}


def _int32(value: Any, where: str) -> None:
    assert isinstance(value, int) and not isinstance(value, bool), f"{where} must be an integer: {value!r}"
    assert 0 <= value <= INT32, f"{where} out of int32 range: {value}"


def scaled_object_shape(doc: Doc) -> None:
    """Fail unless `doc` fits KEDA's ScaledObject CRD: known fields only, required ones present, types."""
    assert (doc["apiVersion"], doc["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    spec = doc["spec"]
    assert set(spec) <= SPEC_FIELDS, set(spec) - SPEC_FIELDS
    assert {"scaleTargetRef", "triggers"} <= set(spec)
    ref = spec["scaleTargetRef"]
    assert set(ref) <= TARGET_REF_FIELDS and isinstance(ref["name"], str)
    for key in INT_FIELDS:
        if key in spec:
            _int32(spec[key], f"spec.{key}")
    if "fallback" in spec:
        fallback = spec["fallback"]
        assert set(fallback) <= {"failureThreshold", "replicas", "behavior"}
        _int32(fallback["failureThreshold"], "fallback.failureThreshold")
        _int32(fallback["replicas"], "fallback.replicas")
        assert fallback.get("behavior", "static") in FALLBACK_BEHAVIORS
    advanced = spec.get("advanced", {})
    assert set(advanced) <= ADVANCED_FIELDS
    config = advanced.get("horizontalPodAutoscalerConfig", {})
    assert set(config) <= HPA_CONFIG_FIELDS
    for direction, rules in config.get("behavior", {}).items():
        assert direction in ("scaleUp", "scaleDown") and set(rules) <= RULES_FIELDS
        for policy in rules.get("policies", []):
            assert set(policy) == {"type", "value", "periodSeconds"}
    triggers = spec["triggers"]
    assert isinstance(triggers, list) and triggers
    for trigger in triggers:
        assert set(trigger) <= TRIGGER_FIELDS and {"type", "metadata"} <= set(trigger)
        assert all(isinstance(v, str) for v in trigger["metadata"].values()), trigger["metadata"]
        assert trigger.get("metricType", "AverageValue") in METRIC_TYPES
        if "authenticationRef" in trigger:
            assert set(trigger["authenticationRef"]) <= {"name", "kind"}
            assert isinstance(trigger["authenticationRef"]["name"], str)


def _keda(**model: Any) -> dict[str, Any]:
    values = copy.deepcopy(ONE_MODEL)
    values["autoscaler"] = "keda"
    values["models"][0].update(model)
    return values


def _metadata(trigger: Doc) -> dict[str, str]:
    found: dict[str, str] = trigger["metadata"]
    return found


def test_every_scaled_object_fits_the_crd(rendered: dict[str, Rendered]) -> None:
    """Each ScaledObject of the scenario has KEDA's CRD shape, and the adapter's metadata parser accepts
    every trigger (the keys are exactly the adapter's or KEDA's own connection keys)."""
    objects = rendered[SCENARIO].find("ScaledObject")
    assert sorted(o["metadata"]["name"] for o in objects) == [BATCH, LLAMA]
    for doc in objects:
        scaled_object_shape(doc)
        for trigger in doc["spec"]["triggers"]:
            meta = _metadata(trigger)
            assert set(meta) <= set(scaler_metadata.KEYS) | scaler_metadata.KEDA_KEYS
            scaler_metadata.parse(NAMESPACE, meta)


def test_no_apiservice_hpa_or_metrics_reader_with_keda(rendered: dict[str, Rendered]) -> None:
    """KEDA owns the APIService and the HPAs: the chart renders neither, nor the HPA controller's reader
    binding, while the adapter keeps the RBAC its own authentication needs."""
    result = rendered[SCENARIO]
    assert result.find("APIService") == []
    assert result.find("HorizontalPodAutoscaler") == []
    assert f"{ADAPTER}-external-metrics-reader" not in {d["metadata"]["name"] for d in result.docs}
    roles = {b["roleRef"]["name"] for b in result.find("ClusterRoleBinding") + result.find("RoleBinding")}
    assert {"system:auth-delegator", "extension-apiserver-authentication-reader"} <= roles
    assert rendered["single-model"].find("ScaledObject") == []


def test_scaled_object_mirrors_the_model(rendered: dict[str, Rendered]) -> None:
    """The ScaledObject scales the model's Deployment between minReplicas and maxReplicas, names KEDA's
    HPA after the model (adopting an HPA of that name) and passes the HPA behaviour through."""
    result = rendered[SCENARIO]
    doc = result.one("ScaledObject", LLAMA)
    spec = doc["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": LLAMA}
    deployment = result.one("Deployment", LLAMA)
    assert "replicas" not in deployment["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 8)
    assert (spec["pollingInterval"], spec["cooldownPeriod"]) == (15, 600)
    assert spec["fallback"] == {"failureThreshold": 3, "replicas": 2}
    config = spec["advanced"]["horizontalPodAutoscalerConfig"]
    assert config["name"] == LLAMA
    assert doc["metadata"]["annotations"]["scaledobject.keda.sh/transfer-hpa-ownership"] == "true"
    assert config["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 600
    assert {"type": "Pods", "value": 2, "periodSeconds": 60} in config["behavior"]["scaleUp"]["policies"]


def test_one_external_trigger_per_metric(rendered: dict[str, Rendered]) -> None:
    """Each metric is an external trigger on the adapter Service's gRPC port with its selector, target,
    activation target and metric type; vLLM metrics select the served model by default."""
    result = rendered[SCENARIO]
    service = result.one("Service", ADAPTER)
    grpc_port = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "grpc")
    address = f"{ADAPTER}.{NAMESPACE}.svc:{grpc_port}"
    triggers = result.one("ScaledObject", BATCH)["spec"]["triggers"]
    assert [t["type"] for t in triggers] == ["external", "external"]
    queue, kv = triggers
    assert queue["metricType"] == "AverageValue" and kv["metricType"] == "Value"
    assert _metadata(queue) == {
        "scalerAddress": address,
        "metric": "queue_depth",
        "labelSelector": "queue_name=inference-requests",
        "target": "50",
        "activationTarget": "5",
    }
    assert _metadata(kv) == {
        "scalerAddress": address,
        "metric": "vllm_kv_cache_usage",
        "labelSelector": "model_name=batch-llm",
        "target": "800m",
        "activationTarget": "0",
    }
    for trigger in triggers:
        assert trigger["authenticationRef"] == {"name": ADAPTER}
        assert result.one("TriggerAuthentication", ADAPTER)


def test_scale_to_zero_with_keda(rendered: dict[str, Rendered]) -> None:
    """minReplicas 0 becomes minReplicaCount 0 with the model's cooldown: KEDA scales to zero itself."""
    spec = rendered[SCENARIO].one("ScaledObject", BATCH)["spec"]
    assert (spec["minReplicaCount"], spec["cooldownPeriod"]) == (0, 900)
    assert "fallback" not in spec


def test_selectors_become_selector_text(tmp_path: Path) -> None:
    """A selector of several labels is the sorted `a=b,c=d` text the adapter parses as the HTTP API does,
    and external-push is passed through."""
    values = _keda(
        autoscaling={
            "maxReplicas": 3,
            "metrics": [
                {
                    "name": "vllm_requests_waiting",
                    "averageValue": 4,
                    "selector": {"model_name": "m", "app.kubernetes.io/name": "vllm"},
                }
            ],
        }
    )
    values["keda"] = {"triggerType": "external-push"}
    (trigger,) = render(tmp_path, values).one("ScaledObject")["spec"]["triggers"]
    assert trigger["type"] == "external-push"
    assert _metadata(trigger)["labelSelector"] == "app.kubernetes.io/name=vllm,model_name=m"
    query = scaler_metadata.parse(NAMESPACE, _metadata(trigger))
    assert (query.metric, query.target, query.activation_target) == ("vllm_requests_waiting", 4.0, 0.0)
    assert len(query.selector.requirements) == 2


def test_self_signed_triggers_skip_verification(tmp_path: Path) -> None:
    """adapter.tls.mode selfSigned: nothing can verify the adapter, so the triggers ask KEDA for TLS
    without verification (test clusters only) and the TriggerAuthentication has no caCert."""
    values = _keda(autoscaling={"maxReplicas": 3})
    values["adapter"] = {"tls": {"mode": "selfSigned"}}
    result = render(tmp_path, values)
    (trigger,) = result.one("ScaledObject")["spec"]["triggers"]
    assert (_metadata(trigger)["enableTLS"], _metadata(trigger)["unsafeSsl"]) == ("true", "true")
    params = [r["parameter"] for r in result.one("TriggerAuthentication")["spec"]["secretTargetRef"]]
    assert params == ["tlsClientCert", "tlsClientKey"]


def test_fallback_behavior_is_passed_through(tmp_path: Path) -> None:
    values = _keda(
        autoscaling={
            "maxReplicas": 3,
            "keda": {"fallback": {"replicas": 2, "behavior": "currentReplicasIfHigher"}},
        }
    )
    fallback = render(tmp_path, values).one("ScaledObject")["spec"]["fallback"]
    assert fallback == {"failureThreshold": 3, "replicas": 2, "behavior": "currentReplicasIfHigher"}


def _keda_217(**model: Any) -> dict[str, Any]:
    return {**_keda(**model), "keda": {"version": "2.17"}}


FAILURES: dict[str, tuple[dict[str, Any], str]] = {
    "fallback beside a Value metric on KEDA 2.17": (
        _keda_217(
            autoscaling={
                "maxReplicas": 3,
                "keda": {"fallback": {"replicas": 2}},
                "metrics": [{"name": "vllm_kv_cache_usage", "value": "800m"}],
            }
        ),
        'models[0].autoscaling.metrics[0].value is refused with autoscaling.keda.fallback of model "m" on '
        "keda.version 2.17: KEDA before 2.18 applies a fallback to AverageValue triggers only",
    ),
    "fallback with a fractional target on KEDA 2.17": (
        _keda_217(
            autoscaling={
                "maxReplicas": 3,
                "keda": {"fallback": {"replicas": 2}},
                "metrics": [{"name": "vllm_requests_waiting", "averageValue": "2500m"}],
            }
        ),
        'models[0].autoscaling.metrics[0].averageValue 2500m of model "m" must be a whole number of at '
        "least 1 with autoscaling.keda.fallback on keda.version 2.17: KEDA before 2.18 computes the fallback "
        "value from the target cut to an integer (2)",
    ),
    "fallback with a target below 1 on KEDA 2.17": (
        _keda_217(
            autoscaling={
                "maxReplicas": 3,
                "keda": {"fallback": {"replicas": 2}},
                "metrics": [{"name": "vllm_requests_waiting", "averageValue": 0.5}],
            }
        ),
        "models[0].autoscaling.metrics[0].averageValue 0.5",
    ),
    "KEDA older than 2.17": (
        {**_keda(autoscaling={"maxReplicas": 3}), "keda": {"version": "2.16"}},
        'keda.version value "2.16" must be 2.17 or later: older KEDA has no float targets and values',
    ),
    "a target below 1m (0 in KEDA's HPA)": (
        _keda(autoscaling={"maxReplicas": 3, "metrics": [{"name": "vllm_kv_cache_usage", "value": "500u"}]}),
        'models[0].autoscaling.metrics[0] target 500u of model "m" must be at least 1m (0.001) with '
        "autoscaler keda: KEDA keeps targets in milli-units",
    ),
    "scale to zero on vLLM metrics only": (
        _keda(autoscaling={"minReplicas": 0, "maxReplicas": 3}),
        'models[0].autoscaling.minReplicas value 0 of model "m" needs an External metric that exists '
        "without replicas",
    ),
    "activation target with the HPA": (
        {
            "models": [
                {
                    "name": "m",
                    "model": "org/model",
                    "autoscaling": {
                        "maxReplicas": 3,
                        "metrics": [
                            {"name": "vllm_requests_waiting", "averageValue": 4, "activationTarget": 1}
                        ],
                    },
                }
            ]
        },
        'models[0].autoscaling.metrics[0].activationTarget of model "m" applies to autoscaler "keda" only',
    ),
    "client certificate Secret missing": (
        {**_keda(autoscaling={"maxReplicas": 3}), "keda": {"clientCertificate": {"mode": "existingSecret"}}},
        "keda.clientCertificate.existingSecret is required "
        "when keda.clientCertificate.mode is existingSecret",
    ),
}


@pytest.fixture(scope="module")
def failures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, HelmResult]:
    return render_many(
        tmp_path_factory.mktemp("keda"), {key: values for key, (values, _) in FAILURES.items()}
    )


@pytest.mark.parametrize("case", [pytest.param(key, id=key) for key in FAILURES])
def test_unworkable_keda_settings_fail_naming_the_key(case: str, failures: dict[str, HelmResult]) -> None:
    """A fallback KEDA would refuse or miscompute, a zero nothing can wake from, an HPA-only setting with
    KEDA's option, and a missing Secret are refused with the key, the model and the reason."""
    result = failures[case]
    assert result.returncode != 0
    assert FAILURES[case][1] in result.stderr, result.stderr


def test_fallback_beside_value_and_fractional_targets_from_keda_2_18(tmp_path: Path) -> None:
    """KEDA 2.18 and later (the default keda.version is 2.20) apply a fallback to Value triggers too
    and keep the target a float (kedacore/keda v2.18.0 pkg/fallback/fallback.go), so both render."""
    for version in ("2.18", None):
        values = _keda(
            autoscaling={
                "maxReplicas": 3,
                "keda": {"fallback": {"replicas": 2, "failureThreshold": 3}},
                "metrics": [
                    {"name": "vllm_kv_cache_usage", "value": "800m"},
                    {"name": "vllm_requests_waiting", "averageValue": "2500m"},
                ],
            }
        )
        if version:
            values["keda"] = {"version": version}
        spec = render(tmp_path / str(version), values).one("ScaledObject")["spec"]
        assert spec["fallback"] == {"failureThreshold": 3, "replicas": 2}
        assert [(t["metricType"], _metadata(t)["target"]) for t in spec["triggers"]] == [
            ("Value", "800m"),
            ("AverageValue", "2500m"),
        ]


def test_whole_targets_pass_with_a_fallback(tmp_path: Path) -> None:
    """The fallback check reads quantities: 2000m and 1k are whole, so they render."""
    values = _keda(
        autoscaling={
            "maxReplicas": 3,
            "keda": {"fallback": {"replicas": 2}},
            "metrics": [
                {"name": "vllm_requests_waiting", "averageValue": "2000m"},
                {"name": "vllm_requests_running", "averageValue": "1k"},
            ],
        }
    )
    triggers = render(tmp_path, values).one("ScaledObject")["spec"]["triggers"]
    assert [_metadata(t)["target"] for t in triggers] == ["2000m", "1k"]
