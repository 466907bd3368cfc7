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
import yaml

from adapter.config import RoleSettings, StaticTarget
from adapter.keda import metadata as scaler_metadata
from adapter.vocabulary import disaggregated, roles, selectors
from adapter.vocabulary.catalogue import MetricDef
from adapter.vocabulary.disaggregated import PrefillBacklogSpec
from tests.helm.conftest import (
    ADAPTER,
    CHART,
    NAMESPACE,
    Doc,
    Rendered,
    container,
    helm_template,
    render,
    render_many,
)
from tests.helm.test_core_configmap_adapter import adapter_config, assert_serves_its_autoscalers
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
            "disaggregation": {"enabled": True, "prefillThroughput": 48000},
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
        DECODE: (
            "decode",
            [("vllm_kv_cache_usage", "Value", "800m"), ("vllm_requests_running", "AverageValue", "96")],
            12,
        ),
    }
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
    values = {
        "models": [
            {
                "name": "m",
                "model": "o/m",
                "autoscaling": {
                    "maxReplicas": 2,
                    "metrics": [{"name": "vllm_prefill_backlog_seconds", "value": 1}],
                },
            }
        ]
    }
    result = helm_template(tmp_path, values=values)
    assert result.returncode != 0 and "is the prefill pool's signal" in result.stderr


def test_schema_refuses_a_role_that_renames_the_model(tmp_path: Path) -> None:
    """A role overrides engine settings, never the model's identity: the schema says so with the path."""
    result = helm_template(tmp_path, values=_pd(prefill={"servedModelName": "other"}))
    assert result.returncode != 0 and "/disaggregation/prefill" in result.stderr


# The adapter's configuration: what the disaggregated models need the adapter to serve.


def _served(result: Rendered) -> dict[str, MetricDef]:
    return {metric.name: metric for metric in assert_serves_its_autoscalers(result).catalogue()}


def _backlog_throughput(metric: MetricDef) -> float:
    assert isinstance(metric.spec, PrefillBacklogSpec), metric
    return metric.spec.throughput


def _pod_rules(result: Rendered) -> list[dict[str, Any]]:
    role = result.find("ClusterRole", f"{ADAPTER}-discovery")
    return [rule for doc in role for rule in doc["rules"] if "pods" in rule["resources"]]


@pytest.mark.parametrize(
    ("scenario", "label", "throughput"),
    [("disaggregated", ROLE, 48000.0), ("disaggregated-keda", "serving.kserve.io/role", 36000.0)],
)
def test_adapter_config_carries_the_roles_and_the_measured_throughput(
    scenario: str, label: str, throughput: float, rendered: dict[str, Rendered]
) -> None:
    """The adapter's own loader accepts the rendered config: its `roles` are the models' role label
    and values, and it serves the prefill pool's backlog with the model's prefillThroughput (the
    metric the prefill autoscaler asks for, with the role in its selector)."""
    result = rendered[scenario]
    config = adapter_config(result)
    assert config.roles == RoleSettings(label=label, prefill="prefill", decode="decode")
    served = _served(result)
    backlog = served[disaggregated.PREFILL_BACKLOG]
    assert _backlog_throughput(backlog) == throughput
    assert backlog.role == roles.Role("prefill", label, "prefill")
    assert served[disaggregated.KV_FETCH].role == roles.Role("decode", label, "decode")
    assert config.source == "prometheus" and config.scrape.pod_labels == ()
    assert _pod_rules(result) == []


SCRAPE = {"source": "scrape"}


def test_scrape_source_copies_the_role_from_the_pods(tmp_path: Path) -> None:
    """With the scrape source discovering pods, the config asks for the role label of each pod (beside
    the user's own pod_labels) and the adapter may list pods, cluster-wide or in the discovery
    namespaces; static targets carry their labels themselves, so nothing is listed."""
    url = "http://10.0.0.5:8000/metrics"
    target = {"url": url, "labels": {ROLE: "prefill"}}
    cases = {
        "cluster": {**_pd(), "adapter": {"config": SCRAPE}},
        "namespaces": {
            **_pd(),
            "adapter": {
                "config": {**SCRAPE, "scrape": {"discovery_namespaces": ["llm"], "pod_labels": ["team"]}}
            },
        },
        "static": {**_pd(), "adapter": {"config": {**SCRAPE, "scrape": {"targets": [target]}}}},
    }
    results = {key: result.rendered() for key, result in render_many(tmp_path, cases).items()}
    list_pods = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    cluster = results["cluster"]
    assert adapter_config(cluster).scrape.pod_labels == (ROLE,)
    assert _pod_rules(cluster) == list_pods
    assert cluster.find("ClusterRoleBinding", f"{ADAPTER}-discovery")
    namespaces = results["namespaces"]
    assert adapter_config(namespaces).scrape.pod_labels == ("team", ROLE)
    assert _pod_rules(namespaces) == list_pods
    assert namespaces.one("RoleBinding", f"{ADAPTER}-discovery")["metadata"]["namespace"] == "llm"
    static = results["static"]
    config = adapter_config(static)
    assert config.scrape.pod_labels == ()
    assert config.scrape.targets == (StaticTarget(url, {ROLE: "prefill"}),)
    assert _pod_rules(static) == []
    for result in results.values():
        assert _backlog_throughput(_served(result)[disaggregated.PREFILL_BACKLOG]) == 48000


def test_models_that_differ_in_throughput_scale_on_backlogs_of_their_own(tmp_path: Path) -> None:
    """The adapter's vllm_prefill_backlog_seconds has one throughput: a second model measured otherwise
    scales its prefill pool on a backlog metric of its own, which the chart treats as the built-in one
    (default selector, the role added, refused outside a prefill pool). A user's window is kept."""
    values = _pd()
    second = copy.deepcopy(values["models"][0])
    second.update(name="qwen", model="org/qwen")
    second["disaggregation"] = {
        "enabled": True,
        "prefill": {"autoscaling": {"metrics": [{"name": "qwen_prefill_backlog_seconds", "value": "500m"}]}},
    }
    values["models"].append(second)
    metrics = {
        "vllm_prefill_backlog_seconds": {"window": "1m"},
        "qwen_prefill_backlog_seconds": {"prefill_throughput": 20000},
    }
    values["adapter"] = {"config": {"metrics": metrics}}
    result = render(tmp_path, values)
    served = _served(result)
    builtin, own = served[disaggregated.PREFILL_BACKLOG], served["qwen_prefill_backlog_seconds"]
    assert (_backlog_throughput(builtin), _backlog_throughput(own)) == (48000, 20000)
    assert isinstance(builtin.spec, PrefillBacklogSpec) and builtin.spec.prompt.window_seconds == 60
    assert own.role == roles.Role("prefill", ROLE, "prefill")
    hpa = result.one("HorizontalPodAutoscaler", "demo-vllm-autoscale-qwen-prefill")
    (metric,) = hpa["spec"]["metrics"]
    assert metric["external"]["metric"]["selector"]["matchLabels"] == {"model_name": "qwen", ROLE: "prefill"}


def test_throughput_is_needed_only_where_the_backlog_is_scaled_on(tmp_path: Path) -> None:
    """A prefill pool scaled on another metric needs no throughput, and the adapter then serves no
    backlog (it would be refused, not guessed)."""
    values = _pd(prefill={"autoscaling": {"metrics": [{"name": "vllm_requests_waiting", "averageValue": 4}]}})
    del values["models"][0]["disaggregation"]["prefillThroughput"]
    served = _served(render(tmp_path, values))
    assert disaggregated.PREFILL_BACKLOG not in served


def _two_models(**second: Any) -> dict[str, Any]:
    values = _pd()
    model = copy.deepcopy(values["models"][0])
    model.update(name="qwen", model="org/qwen")
    model["disaggregation"].update(second)
    values["models"].append(model)
    return values


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"models": [{**PD["models"][0], "disaggregation": {"enabled": True}}]},
            "models[0].disaggregation.prefillThroughput is required: the prefill pool scales on "
            "vllm_prefill_backlog_seconds",
            id="no throughput",
        ),
        pytest.param(
            _two_models(prefillThroughput=20000),
            "models[1].disaggregation.prefillThroughput value 20000 differs from "
            "models[0].disaggregation.prefillThroughput (48000)",
            id="two throughputs on one metric",
        ),
        pytest.param(
            {
                **_pd(),
                "adapter": {
                    "config": {"metrics": {"vllm_prefill_backlog_seconds": {"prefill_throughput": 1}}}
                },
            },
            "models[0].disaggregation.prefillThroughput value 48000 differs from "
            "adapter.config.metrics.vllm_prefill_backlog_seconds.prefill_throughput (1)",
            id="a throughput in adapter.config too",
        ),
        pytest.param(
            _two_models(roleLabel="serving.kserve.io/role"),
            "models[1].disaggregation.roleLabel and roleValues "
            "(serving.kserve.io/role=prefill|decode) differ "
            "from models[0].disaggregation's (llm-d.ai/role=prefill|decode)",
            id="two role labels",
        ),
        pytest.param(
            {**_pd(), "adapter": {"config": {"roles": {"label": "serving.kserve.io/role"}}}},
            'adapter.config.roles.label value "serving.kserve.io/role" differs from models[0].disaggregation',
            id="adapter roles against the models'",
        ),
        pytest.param(
            _pd(roleLabel="pod"),
            'models[0].disaggregation.roleLabel value "pod" is refused',
            id="a role label the series already have",
        ),
        pytest.param(
            _pd(
                prefill={"autoscaling": {"metrics": [{"name": "vllm_kv_fetch_requests", "averageValue": 2}]}}
            ),
            "is the decode pool's signal",
            id="kv fetches on prefill",
        ),
    ],
)
def test_adapter_config_refusals_name_the_key(tmp_path: Path, values: dict[str, Any], message: str) -> None:
    """What would leave an autoscaler on a metric the adapter cannot serve, or serve for the wrong pods,
    fails the render with the key; the missing throughput says where it comes from."""
    result = helm_template(tmp_path, values=values)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    if "is required" in message:
        assert "vllm-autoscale profile" in result.stderr


def test_the_readme_example_hpa_is_what_the_chart_renders(rendered: dict[str, Rendered]) -> None:
    """helm/README.md's prefill HPA example is the prefill HPA of ci/disaggregated-values.yaml, and the
    decode HPA selects the same way with the decode role."""
    text = (CHART / "README.md").read_text(encoding="utf-8")
    intro = "The prefill HPA `ci/disaggregated-values.yaml` renders"
    block = text[text.index(intro) :].split("```yaml\n", 1)[1].split("```", 1)[0]
    example = yaml.safe_load(block)
    result = rendered["disaggregated"]
    assert example["metrics"] == result.one("HorizontalPodAutoscaler", PREFILL)["spec"]["metrics"]
    for metric in result.one("HorizontalPodAutoscaler", DECODE)["spec"]["metrics"]:
        assert metric["external"]["metric"]["selector"]["matchLabels"] == {
            ROLE: "decode",
            "model_name": "llama-8b",
        }
