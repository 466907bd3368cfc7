"""The chart's disaggregated mode (`disaggregation.enabled`): per model a prefill and a decode Deployment
joined by a KV connector, each with its role label, Service, PDB and autoscaler on its own signal, and
the P/D proxy in front.

The scenarios `ci/disaggregated-values.yaml` (HPA, NixlConnector, chart's proxy, an aggregated model
beside) and `ci/disaggregated-keda-values.yaml` (KEDA, P2pNcclConnector, a KServe role label) are also
linted and validated against the Kubernetes 1.29 and 1.37 schemas with every other scenario by
test_chart.py; here ScaledObjects go through the shape of KEDA's CRD and the adapter's metadata parser.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from adapter.keda import metadata as scaler_metadata
from adapter.vocabulary import selectors
from tests.helm.conftest import NAMESPACE, Doc, Rendered, container, helm_template, render
from tests.helm.test_keda_scaledobject_vllm import scaled_object_shape

PREFIX = "demo-vllm-autoscale-llama-8b"
PREFILL, DECODE, PROXY = f"{PREFIX}-prefill", f"{PREFIX}-decode", f"{PREFIX}-proxy"
ROLE = "llm-d.ai/role"
PD: dict[str, Any] = {
    "models": [
        {
            "name": "llama-8b",
            "model": "org/model",
            "autoscaling": {"maxReplicas": 4},
            "disaggregation": {"enabled": True},
        }
    ]
}


def _pd(**disaggregation: Any) -> dict[str, Any]:
    values = copy.deepcopy(PD)
    values["models"][0]["disaggregation"].update(disaggregation)
    return values


def _kv_config(deployment: Doc) -> dict[str, Any]:
    flags = [a for a in container(deployment, "vllm")["args"] if a.startswith("--kv-transfer-config=")]
    assert len(flags) == 1, flags
    found: dict[str, Any] = json.loads(flags[0].split("=", 1)[1])
    return found


def test_two_deployments_with_distinct_role_labels_and_selectors(rendered: dict[str, Rendered]) -> None:
    """Prefill and decode are two Deployments whose selectors differ by the role label, each matching its
    own pod template and no pod of the other (or of the aggregated model beside them)."""
    result = rendered["disaggregated"]
    deployments = {d["metadata"]["name"]: d for d in result.find("Deployment")}
    assert {PREFILL, DECODE, "demo-vllm-autoscale-qwen"} <= set(deployments)
    assert PREFIX not in deployments  # no aggregated Deployment of a disaggregated model
    prefill, decode = deployments[PREFILL], deployments[DECODE]
    for deployment, role in ((prefill, "prefill"), (decode, "decode")):
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector[ROLE] == role
        assert deployment["metadata"]["labels"][ROLE] == role
        assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert prefill["spec"]["selector"]["matchLabels"] != decode["spec"]["selector"]["matchLabels"]
    for name, other in ((PREFILL, decode), (DECODE, prefill)):
        labels = other["spec"]["template"]["metadata"]["labels"]
        assert not deployments[name]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert ROLE not in deployments["demo-vllm-autoscale-qwen"]["spec"]["selector"]["matchLabels"]


def test_services_and_pdbs_select_one_role(rendered: dict[str, Rendered]) -> None:
    """Each role has its Service (scraped by the adapter: component vllm, port http) and PDB on its own
    pods; the model's name is the proxy's Service, which the scrape source must not take for an engine."""
    result = rendered["disaggregated"]
    for name, role in ((PREFILL, "prefill"), (DECODE, "decode")):
        service = result.one("Service", name)
        assert service["spec"]["selector"][ROLE] == role
        assert service["metadata"]["labels"]["app.kubernetes.io/component"] == "vllm"
        assert [p["name"] for p in service["spec"]["ports"]] == ["http"]
        assert result.one("PodDisruptionBudget", name)["spec"]["selector"]["matchLabels"][ROLE] == role
    entry = result.one("Service", PREFIX)
    assert entry["metadata"]["labels"]["app.kubernetes.io/component"] == "pd-proxy"
    proxy = result.one("Deployment", PROXY)
    assert entry["spec"]["selector"].items() <= proxy["spec"]["template"]["metadata"]["labels"].items()


def test_nixl_connector_on_both_roles(rendered: dict[str, Rendered]) -> None:
    """NixlConnector is kv_both on both roles; its side channel listens on the pod's own IP."""
    result = rendered["disaggregated"]
    for name in (PREFILL, DECODE):
        deployment = result.one("Deployment", name)
        assert _kv_config(deployment) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
        env = {e["name"]: e for e in container(deployment, "vllm")["env"]}
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == "5600"
    args = container(result.one("Deployment", PREFILL), "vllm")["args"]
    assert "--max-num-seqs=32" in args  # the role's own settings
    qwen = container(result.one("Deployment", "demo-vllm-autoscale-qwen"), "vllm")
    assert not [a for a in qwen["args"] if "kv-transfer" in a]


def test_p2p_nccl_connector_producer_and_consumer(rendered: dict[str, Rendered]) -> None:
    """P2pNcclConnector is one-way: kv_producer on prefill, kv_consumer on decode, both registering with
    the proxy's Service; the user's extra keys are merged in."""
    result = rendered["disaggregated-keda"]
    prefill, decode = (
        _kv_config(result.one("Deployment", PREFILL)),
        _kv_config(result.one("Deployment", DECODE)),
    )
    assert (prefill["kv_role"], decode["kv_role"]) == ("kv_producer", "kv_consumer")
    for config in (prefill, decode):
        assert config["kv_connector"] == "P2pNcclConnector"
        assert config["kv_buffer_size"] == "8e9"
        assert config["kv_connector_extra_config"]["proxy_ip"] == f"{PREFIX}.{NAMESPACE}.svc"
    ports = {p["name"] for p in result.one("Service", PREFIX)["spec"]["ports"]}
    assert ports == {"http", "discovery"}


def test_each_role_has_its_hpa_on_its_own_signal(rendered: dict[str, Rendered]) -> None:
    """The prefill HPA scales the prefill Deployment on vllm_prefill_backlog_seconds, the decode HPA the
    decode Deployment on KV usage and running requests, each selecting model_name and its own role."""
    result = rendered["disaggregated"]
    assert PREFIX not in {h["metadata"]["name"] for h in result.find("HorizontalPodAutoscaler")}
    expected = {
        PREFILL: ("prefill", [("vllm_prefill_backlog_seconds", "Value", "1")], 4),
        DECODE: ("decode", [("vllm_kv_cache_usage", "Value", "800m"), ("vllm_requests_running", "AverageValue", "96")], 12),
    }  # fmt: skip
    for name, (role, metrics, max_replicas) in expected.items():
        spec = result.one("HorizontalPodAutoscaler", name)["spec"]
        assert spec["scaleTargetRef"]["name"] == name
        assert spec["maxReplicas"] == max_replicas
        seen = []
        for metric in spec["metrics"]:
            external = metric["external"]
            assert external["metric"]["selector"]["matchLabels"] == {"model_name": "llama-8b", ROLE: role}
            target = external["target"]
            seen.append(
                (
                    external["metric"]["name"],
                    target["type"],
                    target.get("value") or target.get("averageValue"),
                )
            )
        assert seen == metrics


def test_decode_scales_down_only_as_its_cache_drains(rendered: dict[str, Rendered]) -> None:
    """Decode scales down after a longer stabilization, one pod at a time, and each pod's preStop waits
    for its running requests (its KV cache) to drain within a grace period that covers the wait."""
    result = rendered["disaggregated"]
    prefill = result.one("HorizontalPodAutoscaler", PREFILL)["spec"]["behavior"]["scaleDown"]
    decode = result.one("HorizontalPodAutoscaler", DECODE)["spec"]["behavior"]["scaleDown"]
    assert decode["stabilizationWindowSeconds"] > prefill["stabilizationWindowSeconds"]
    assert decode["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 300}]
    pod = result.one("Deployment", DECODE)["spec"]["template"]["spec"]
    hook = container(result.one("Deployment", DECODE), "vllm")["lifecycle"]["preStop"]["exec"]["command"]
    assert "/opt/vllm-autoscale/drain.py" in hook and "--timeout=900" in hook
    assert pod["terminationGracePeriodSeconds"] >= 900 + 10


def test_scaled_objects_per_role_fit_keda(rendered: dict[str, Rendered]) -> None:
    """With KEDA, one ScaledObject per role fits KEDA's CRD shape, targets its Deployment, and its
    trigger's labelSelector (the configured role label) parses in the adapter."""
    result = rendered["disaggregated-keda"]
    objects = {o["metadata"]["name"]: o for o in result.find("ScaledObject")}
    assert set(objects) == {PREFILL, DECODE}
    for name, role, metric in (
        (PREFILL, "prefill", "vllm_prefill_backlog_seconds"),
        (DECODE, "decode", "vllm_kv_cache_usage"),
    ):
        doc = objects[name]
        scaled_object_shape(doc)
        assert doc["spec"]["scaleTargetRef"]["name"] == name
        assert doc["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["name"] == name
        (trigger,) = doc["spec"]["triggers"]
        query = scaler_metadata.parse(NAMESPACE, trigger["metadata"])
        assert query.metric == metric
        assert query.selector == selectors.parse(f"model_name=llama-8b,serving.kserve.io/role={role}")
    assert result.find("HorizontalPodAutoscaler") == []


def test_monitors_carry_the_role_onto_series(tmp_path: Path, rendered: dict[str, Rendered]) -> None:
    """Prometheus gets each pod's role label as llm_d_ai_role (the name the adapter maps the key to), on
    the PodMonitor and the ServiceMonitor; aggregated releases keep their relabelings as they were."""
    relabel = {"sourceLabels": ["__meta_kubernetes_pod_label_llm_d_ai_role"], "targetLabel": "llm_d_ai_role"}
    endpoints = rendered["disaggregated"].one("PodMonitor")["spec"]["podMetricsEndpoints"]
    assert relabel in endpoints[0]["relabelings"]
    service_monitor = render(tmp_path, {**PD, "monitoring": {"vllm": {"kind": "ServiceMonitor"}}})
    monitor = [m for m in service_monitor.find("ServiceMonitor") if m["metadata"]["name"].endswith("-vllm")]
    assert relabel in monitor[0]["spec"]["endpoints"][0]["relabelings"]
    assert (
        relabel
        not in rendered["single-model"].one("PodMonitor")["spec"]["podMetricsEndpoints"][0]["relabelings"]
    )


def test_proxy_runs_the_chart_script_against_both_pools(rendered: dict[str, Rendered]) -> None:
    """The proxy runs files/pd-proxy/pd_proxy.py from its ConfigMap against the two role Services, is
    ready only while both answer, and asks for no GPU."""
    result = rendered["disaggregated"]
    proxy = result.one("Deployment", PROXY)
    main = container(proxy, "proxy")
    assert main["command"][:2] == ["python3", "/opt/pd-proxy/pd_proxy.py"]
    assert f"--prefill=http://{PREFILL}:8000" in main["command"]
    assert f"--decode=http://{DECODE}:8000" in main["command"]
    assert main["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert not any("gpu" in key for key in main["resources"].get("limits", {}))
    script = result.one("ConfigMap", "demo-vllm-autoscale-pd-proxy")
    assert "pd_proxy.py" in script["data"]
    keda = rendered["disaggregated-keda"]
    assert (
        container(keda.one("Deployment", PROXY), "proxy")["command"][1]
        == "/app/disagg_proxy_p2p_nccl_xpyd.py"
    )
    assert keda.find("ConfigMap", "demo-vllm-autoscale-pd-proxy") == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(
            {"connector": "P2pNcclConnector"},
            "proxy.command is required with connector P2pNcclConnector",
            id="p2p without proxy",
        ),
        pytest.param(
            {"roleValues": {"prefill": "worker", "decode": "worker"}},
            "need distinct role labels",
            id="same role value",
        ),
        pytest.param(
            {"decode": {"extraArgs": ["--kv_transfer_config={}"]}},
            'models[0].disaggregation.decode.extraArgs[0] value "--kv_transfer_config={}" is refused',
            id="kv-transfer-config in extraArgs",
        ),
        pytest.param(
            {"decode": {"autoscaling": {"metrics": [{"name": "vllm_prefill_backlog_seconds", "value": 1}]}}},
            "is the prefill pool's signal",
            id="backlog on decode",
        ),
    ],
)
def test_refusals_name_the_value(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    """Settings that would scale a pool on the wrong pods or break the hand-over fail the render, naming
    the key and why."""
    result = helm_template(tmp_path, values=_pd(**change))
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_backlog_metric_is_refused_on_an_aggregated_model(tmp_path: Path) -> None:
    values = {"models": [{"name": "m", "model": "o/m", "autoscaling": {"maxReplicas": 2, "metrics": [{"name": "vllm_prefill_backlog_seconds", "value": 1}]}}]}  # fmt: skip
    result = helm_template(tmp_path, values=values)
    assert result.returncode != 0 and "is the prefill pool's signal" in result.stderr


def test_schema_refuses_a_role_that_renames_the_model(tmp_path: Path) -> None:
    """A role overrides engine settings, never the model's identity: the schema says so with the path."""
    result = helm_template(tmp_path, values=_pd(prefill={"servedModelName": "other"}))
    assert result.returncode != 0 and "/disaggregation/prefill" in result.stderr
