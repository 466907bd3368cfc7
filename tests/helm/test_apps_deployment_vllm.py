"""templates/apps-deployment-vllm.yaml: one vLLM Deployment per model, on GPU nodes, never losing metrics."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.helm.conftest import (
    CHART,
    SCENARIOS,
    Doc,
    Rendered,
    container,
    models_of,
    render,
    scenario_file,
)


def _args(deployment: Doc) -> list[str]:
    return [str(a) for a in container(deployment, "vllm")["args"]]


def _flag(deployment: Doc, flag: str) -> str | None:
    for arg in _args(deployment):
        if arg.startswith(f"{flag}="):
            return arg.split("=", 1)[1]
    return None


#: model name → overrides; rendered together once, as models of one release
VARIANTS: dict[str, dict[str, Any]] = {
    "cold-180": {"coldStartSeconds": 180},
    "cold-301": {"coldStartSeconds": 301},
    "long-context": {"maxModelLen": 1000000},
    "defaults-off": {"dropCreatedSeries": False, "podDisruptionBudget": {"enabled": False}},
    "pipeline": {"gpu": {"count": 8}, "pipelineParallelSize": 2},
    "spread": {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}},
    "yaml-prompt": {"warmup": {"enabled": True, "prompt": "Question: 2 + 2? #answer"}},
}
#: the on-demand pool's node affinity in the variants' release (H100s only)
POOL_AFFINITY: dict[str, Any] = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "nvidia.com/gpu.product",
                            "operator": "In",
                            "values": ["NVIDIA-H100-80GB-HBM3"],
                        }
                    ]
                }
            ]
        }
    }
}


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    models = [
        {"name": name, "model": "org/model", "autoscaling": {"maxReplicas": 3}, **overrides}
        for name, overrides in VARIANTS.items()
    ]
    values = {"models": models, "gpuPools": {"on-demand": {"affinity": POOL_AFFINITY}}}
    return render(tmp_path_factory.mktemp("variants"), values)


def _variant(variants: Rendered, name: str) -> Doc:
    return variants.one("Deployment", f"demo-vllm-autoscale-{name}")


def _cold_start(scenario: str, model: str) -> int:
    """coldStartSeconds of a scenario's model, from the scenario file or the chart default."""
    values = yaml.safe_load(scenario_file(scenario).read_text(encoding="utf-8"))
    defaults = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))["vllm"]
    entry = next(m for m in values["models"] if m["name"] == model)
    seconds = entry.get(
        "coldStartSeconds", values.get("vllm", {}).get("coldStartSeconds", defaults["coldStartSeconds"])
    )
    return int(seconds)


def test_every_scenario_requests_and_limits_its_gpus(rendered: dict[str, Rendered]) -> None:
    """Every vLLM container requests and limits its GPU
    resource, with tensor parallelism across all of them."""
    checked = 0
    for result in rendered.values():
        for deployment in models_of(result):
            resources = container(deployment, "vllm")["resources"]
            gpu = {k: v for k, v in resources["limits"].items() if "/" in k}
            assert len(gpu) == 1, deployment["metadata"]["name"]
            ((resource, count),) = gpu.items()
            assert resources["requests"][resource] == count
            assert int(_flag(deployment, "--tensor-parallel-size") or 0) == count
            checked += 1
    assert checked >= len(SCENARIOS)


def test_pools_place_models_on_their_gpu_nodes(rendered: dict[str, Rendered]) -> None:
    """A model lands on its pool's nodes and tolerates the GPU taint; spot and on-demand differ."""
    result = rendered["two-models-pools"]
    big = result.one("Deployment", "demo-vllm-autoscale-llama-70b")["spec"]["template"]["spec"]
    small = result.one("Deployment", "demo-vllm-autoscale-qwen-small")["spec"]["template"]["spec"]
    assert big["nodeSelector"]["karpenter.sh/capacity-type"] == "on-demand"
    assert small["nodeSelector"]["karpenter.sh/capacity-type"] == "spot"
    for spec in (big, small):
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
        assert spec["runtimeClassName"] == "nvidia"
    assert (
        container({"spec": {"template": {"spec": small}}}, "vllm")["resources"]["limits"][
            "nvidia.com/mig-3g.40gb"
        ]
        == 1
    )


def test_every_scenario_schedules_on_a_gpu_pool(rendered: dict[str, Rendered]) -> None:
    """Every vLLM pod carries the node labels of one of the chart's GPU pools and tolerates that pool's
    taints, so it neither lands on a CPU node nor stays Pending on a tainted GPU node."""
    pools = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))["gpuPools"]
    checked = 0
    for name, result in rendered.items():
        for deployment in models_of(result):
            spec = deployment["spec"]["template"]["spec"]
            node_selector = spec.get("nodeSelector", {})
            matching = [
                pool for pool in pools.values() if pool["nodeSelector"].items() <= node_selector.items()
            ]
            assert matching, f"{name}: {deployment['metadata']['name']} selects no GPU pool: {node_selector}"
            assert all(t in spec.get("tolerations", []) for t in matching[0]["tolerations"])
            checked += 1
    assert checked >= len(SCENARIOS)


@pytest.mark.parametrize("scenario", [pytest.param(s, id=s) for s in SCENARIOS])
def test_rollout_deadline_outlasts_the_cold_start(scenario: str, rendered: dict[str, Rendered]) -> None:
    """progressDeadlineSeconds covers the startup budget plus ten minutes for a GPU node and the image pull,
    so a 15-minute model load is not reported as a failed rollout at Kubernetes' default 600 s."""
    for deployment in models_of(rendered[scenario]):
        probe = container(deployment, "vllm")["startupProbe"]
        budget = probe["failureThreshold"] * probe["periodSeconds"]
        assert deployment["spec"]["progressDeadlineSeconds"] >= budget + 600


@pytest.mark.parametrize("scenario", [pytest.param(s, id=s) for s in SCENARIOS])
def test_startup_probe_budget_covers_the_cold_start(scenario: str, rendered: dict[str, Rendered]) -> None:
    """The startupProbe allows at least coldStartSeconds before the kubelet restarts a loading replica."""
    for deployment in models_of(rendered[scenario]):
        probe = container(deployment, "vllm")["startupProbe"]
        budget = probe.get("initialDelaySeconds", 0) + probe["failureThreshold"] * probe["periodSeconds"]
        model = deployment["metadata"]["labels"]["vllm-autoscale.io/model"]
        cold_start = _cold_start(scenario, model)
        assert budget >= cold_start, f"{model}: startup budget {budget}s < cold start {cold_start}s"


@pytest.mark.parametrize(
    ("model", "cold_start", "expected_threshold"),
    [
        pytest.param("cold-180", 180, 19, id="3 minutes at 10 s periods needs 18 probes plus one spare"),
        pytest.param("cold-301", 301, 32, id="a partial period rounds up"),
    ],
)
def test_startup_threshold_follows_cold_start(
    model: str, cold_start: int, expected_threshold: int, variants: Rendered
) -> None:
    """failureThreshold is ceil(coldStartSeconds / period) + 1, so a slow load is never cut short."""
    probe = container(_variant(variants, model), "vllm")["startupProbe"]
    assert probe["failureThreshold"] == expected_threshold
    assert probe["failureThreshold"] * probe["periodSeconds"] >= cold_start
    assert probe["httpGet"] == {"path": "/health", "port": "http"}


def test_readiness_and_liveness_use_health(rendered: dict[str, Rendered]) -> None:
    """Readiness and liveness probe vLLM's /health on the named port."""
    deployment = next(models_of(rendered["single-model"]))
    vllm = container(deployment, "vllm")
    for probe in ("readinessProbe", "livenessProbe"):
        assert vllm[probe]["httpGet"] == {"path": "/health", "port": "http"}


def test_no_replicas_field_when_the_hpa_owns_it(rendered: dict[str, Rendered]) -> None:
    """A Deployment with an HPA has no `replicas` (helm upgrades would reset the HPA's choice)."""
    for name, result in rendered.items():
        hpa_targets = {h["spec"]["scaleTargetRef"]["name"] for h in result.find("HorizontalPodAutoscaler")}
        for deployment in models_of(result):
            if deployment["metadata"]["name"] in hpa_targets:
                assert "replicas" not in deployment["spec"], f"{name}: {deployment['metadata']['name']}"


def test_replicas_set_when_autoscaling_is_off(rendered: dict[str, Rendered]) -> None:
    """Without an HPA the Deployment gets the configured replica count."""
    result = rendered["keda-apiservice"]
    assert result.find("HorizontalPodAutoscaler") == []
    assert next(models_of(result))["spec"]["replicas"] == 2


def test_arguments_come_from_values(rendered: dict[str, Rendered]) -> None:
    """The vLLM flags reflect the model's values, and --disable-log-stats never appears."""
    deployment = rendered["two-models-pools"].one("Deployment", "demo-vllm-autoscale-llama-70b")
    args = _args(deployment)
    assert args[0] == "meta-llama/Llama-3.3-70B-Instruct"
    assert container(deployment, "vllm")["command"] == ["vllm", "serve"]
    assert _flag(deployment, "--served-model-name") == "llama-70b"
    assert _flag(deployment, "--max-num-seqs") == "128"
    assert _flag(deployment, "--gpu-memory-utilization") == "0.92"
    assert _flag(deployment, "--max-model-len") == "32k"
    assert _flag(deployment, "--quantization") == "fp8"
    assert _flag(deployment, "--port") == "8000"
    assert "--enable-prefix-caching" in args
    for result in rendered.values():
        for model in models_of(result):
            assert not any(a.startswith("--disable-log-stats") for a in _args(model))


def test_large_integers_render_as_integers(variants: Rendered) -> None:
    """A max-model-len of a million renders as 1000000, not Go's float form 1e+06."""
    assert _flag(_variant(variants, "long-context"), "--max-model-len") == "1000000"


def test_pod_plumbing(rendered: dict[str, Rendered]) -> None:
    """/dev/shm is memory-backed, the weights cache is mounted, the HF token comes from its Secret, and no
    service-link variables (VLLM_PORT) reach vLLM."""
    deployment = next(models_of(rendered["single-model"]))
    spec = deployment["spec"]["template"]["spec"]
    assert spec["enableServiceLinks"] is False
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    assert "emptyDir" in volumes["model-cache"]
    mounts = {m["name"]: m["mountPath"] for m in container(deployment, "vllm")["volumeMounts"]}
    assert mounts["dshm"] == "/dev/shm"
    assert mounts["model-cache"] == "/root/.cache/huggingface"
    env = {e["name"]: e for e in container(deployment, "vllm")["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf-token", "key": "token"}
    assert env["PROMETHEUS_DISABLE_CREATED_SERIES"]["value"] == "True"


def test_shared_cache_uses_the_created_claim(rendered: dict[str, Rendered]) -> None:
    """A model with a created cache PVC mounts exactly that claim, which outlives the release."""
    result = rendered["two-models-pools"]
    claim = result.one("PersistentVolumeClaim", "demo-vllm-autoscale-llama-70b-cache")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    spec = result.one("Deployment", "demo-vllm-autoscale-llama-70b")["spec"]["template"]["spec"]
    cache = next(v for v in spec["volumes"] if v["name"] == "model-cache")
    assert cache["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]


def test_grace_period_covers_the_drain(rendered: dict[str, Rendered]) -> None:
    """terminationGracePeriodSeconds exceeds the preStop drain (settle + in-flight timeout)."""
    for result in rendered.values():
        for deployment in models_of(result):
            spec = deployment["spec"]["template"]["spec"]
            command = container(deployment, "vllm")["lifecycle"]["preStop"]["exec"]["command"]
            assert command[:2] == ["python3", "/opt/vllm-autoscale/drain.py"]
            options = dict(a.removeprefix("--").split("=", 1) for a in command[2:])
            assert spec["terminationGracePeriodSeconds"] > int(options["settle"]) + int(options["timeout"])


def test_warmup_gates_startup_on_a_completion(rendered: dict[str, Rendered]) -> None:
    """With warm-up on, the startupProbe runs the warm-up script against the served model name."""
    deployment = rendered["two-models-pools"].one("Deployment", "demo-vllm-autoscale-llama-70b")
    probe = container(deployment, "vllm")["startupProbe"]
    assert probe["exec"]["command"][:2] == ["python3", "/opt/vllm-autoscale/warmup.py"]
    assert "--model=llama-70b" in probe["exec"]["command"]
    assert probe["failureThreshold"] * probe["periodSeconds"] >= 900
    scripts = rendered["two-models-pools"].one("ConfigMap", "demo-vllm-autoscale-vllm-scripts")
    assert {"warmup.py", "drain.py"} <= set(scripts["data"])


def test_containers_drop_privileges(rendered: dict[str, Rendered]) -> None:
    """vLLM containers cannot escalate privileges and drop every capability; no API token is mounted."""
    deployment = next(models_of(rendered["single-model"]))
    context = container(deployment, "vllm")["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    assert deployment["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_model_can_turn_a_default_off(variants: Rendered) -> None:
    """A model's `false` overrides a `true` default (sprig's merge would silently keep the default)."""
    env = container(_variant(variants, "defaults-off"), "vllm").get("env") or []
    assert "PROMETHEUS_DISABLE_CREATED_SERIES" not in {e["name"] for e in env}
    pdbs = {p["metadata"]["name"] for p in variants.find("PodDisruptionBudget")}
    assert "demo-vllm-autoscale-defaults-off" not in pdbs
    assert "demo-vllm-autoscale-cold-180" in pdbs


def test_tensor_parallel_size_is_gpus_over_pipeline_stages(variants: Rendered) -> None:
    """8 GPUs in 2 pipeline stages give tensor parallelism 4."""
    deployment = _variant(variants, "pipeline")
    assert _flag(deployment, "--tensor-parallel-size") == "4"
    assert _flag(deployment, "--pipeline-parallel-size") == "2"
    assert container(deployment, "vllm")["resources"]["limits"]["nvidia.com/gpu"] == 8


def test_model_affinity_is_merged_over_the_pool(variants: Rendered) -> None:
    """A model's pod anti-affinity adds to its pool's node affinity instead of silently dropping it."""
    affinity = _variant(variants, "spread")["spec"]["template"]["spec"]["affinity"]
    assert affinity["nodeAffinity"] == POOL_AFFINITY["nodeAffinity"]
    assert "podAntiAffinity" in affinity
    assert _variant(variants, "cold-180")["spec"]["template"]["spec"]["affinity"] == POOL_AFFINITY


def test_warmup_arguments_survive_yaml(variants: Rendered) -> None:
    """A prompt with YAML syntax (": ", "#") reaches warmup.py intact as one argument."""
    command = container(_variant(variants, "yaml-prompt"), "vllm")["startupProbe"]["exec"]["command"]
    assert "--prompt=Question: 2 + 2? #answer" in command
    assert "--model=yaml-prompt" in command
