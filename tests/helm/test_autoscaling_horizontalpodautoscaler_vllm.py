"""templates/autoscaling-horizontalpodautoscaler-vllm.yaml:
one autoscaling/v2 HPA per model on external metrics."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from adapter.vocabulary import catalogue
from tests.helm.conftest import ONE_MODEL, Doc, HelmResult, Rendered, render, render_many


def _with_autoscaling(**autoscaling: Any) -> dict[str, Any]:
    values = copy.deepcopy(ONE_MODEL)
    values["models"][0]["autoscaling"] = autoscaling
    return values


def _external(hpa: Doc) -> dict[str, Doc]:
    return {m["external"]["metric"]["name"]: m["external"] for m in hpa["spec"]["metrics"]}


def test_default_metric_is_inflight_per_replica(rendered: dict[str, Rendered]) -> None:
    """Without metrics configured, the HPA targets vllm_requests_inflight at 0.75 × max-num-seqs per replica,
    selected by the served model name."""
    hpa = rendered["single-model"].one("HorizontalPodAutoscaler")
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "External"
    assert metric["external"]["metric"] == {
        "name": "vllm_requests_inflight",
        "selector": {"matchLabels": {"model_name": "llama-8b"}},
    }
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "192"}


def test_several_metrics_with_their_target_types(rendered: dict[str, Rendered]) -> None:
    """Several metrics at once, each with AverageValue or Value as configured."""
    hpa = rendered["two-models-pools"].one("HorizontalPodAutoscaler", "demo-vllm-autoscale-llama-70b")
    metrics = _external(hpa)
    assert metrics["vllm_requests_inflight"]["target"] == {"type": "AverageValue", "averageValue": "96"}
    assert metrics["vllm_kv_cache_usage"]["target"] == {"type": "Value", "value": "800m"}
    assert metrics["vllm_ttft_seconds"]["target"] == {"type": "Value", "value": "2"}
    for metric in metrics.values():
        assert metric["metric"]["selector"] == {"matchLabels": {"model_name": "llama-70b"}}


def test_every_hpa_has_a_cap_and_targets_its_deployment(rendered: dict[str, Rendered]) -> None:
    """Every HPA has maxReplicas ≥ minReplicas and scales the model's own Deployment."""
    count = 0
    for result in rendered.values():
        for hpa in result.find("HorizontalPodAutoscaler"):
            spec = hpa["spec"]
            assert spec["maxReplicas"] >= max(1, spec["minReplicas"])
            target = spec["scaleTargetRef"]
            assert target["kind"] == "Deployment"
            assert result.one("Deployment", target["name"])
            count += 1
    assert count >= 5


def test_behavior_scales_up_fast_and_down_slowly(rendered: dict[str, Rendered]) -> None:
    """Default behaviour: no up-scaling stabilization, 100%
    or 2 pods a minute; 600 s down, 1 pod per 120 s."""
    behavior = rendered["single-model"].one("HorizontalPodAutoscaler")["spec"]["behavior"]
    up, down = behavior["scaleUp"], behavior["scaleDown"]
    assert up["stabilizationWindowSeconds"] == 0
    assert {"type": "Percent", "value": 100, "periodSeconds": 60} in up["policies"]
    assert {"type": "Pods", "value": 2, "periodSeconds": 60} in up["policies"]
    assert up["selectPolicy"] == "Max"
    assert down["stabilizationWindowSeconds"] == 600
    assert down["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 120}]


def test_scale_to_zero_scales_on_the_upstream_queue(rendered: dict[str, Rendered]) -> None:
    """minReplicas 0 comes with queue_depth, selected by the exporter's labels rather than model_name."""
    hpa = rendered["scale-to-zero"].one("HorizontalPodAutoscaler")
    assert hpa["spec"]["minReplicas"] == 0
    queue = _external(hpa)["queue_depth"]
    assert queue["metric"]["selector"] == {"matchLabels": {"queue_name": "inference-requests"}}
    assert queue["target"] == {"type": "AverageValue", "averageValue": "50"}


def test_scale_to_zero_on_any_upstream_metric(tmp_path: Path) -> None:
    """Any metric defined in adapter.config.metrics can wake a model from zero, whatever its name (a
    RabbitMQ queue here); only the vLLM metrics, which vanish with the replicas, cannot."""
    values = _with_autoscaling(
        minReplicas=0,
        maxReplicas=3,
        metrics=[{"name": "rabbitmq_ready", "averageValue": 20, "selector": {"queue": "prompts"}}],
    )
    values["adapter"] = {
        "config": {
            "metrics": {
                "rabbitmq_ready": {
                    "query": 'sum(rabbitmq_queue_messages_ready{queue="prompts", <<.LabelMatchers>>})',
                    "namespaced": False,
                }
            }
        }
    }
    hpa = render(tmp_path, values).one("HorizontalPodAutoscaler")
    assert hpa["spec"]["minReplicas"] == 0
    assert _external(hpa)["rabbitmq_ready"]["metric"]["selector"] == {"matchLabels": {"queue": "prompts"}}


def test_a_saturation_metric_is_a_vllm_metric(tmp_path: Path) -> None:
    """A configured saturation metric (one with a `capacity`) is computed from the replicas' gauges: it
    gets the model's default selector, and it cannot wake a model from zero."""
    saturation = {"metrics": {"vllm_saturation": {"capacity": 48, "kv_target": 0.9}}}
    values = _with_autoscaling(maxReplicas=3, metrics=[{"name": "vllm_saturation", "value": 1}])
    values["adapter"] = {"config": copy.deepcopy(saturation)}
    hpa = render(tmp_path, values).one("HorizontalPodAutoscaler")
    selector = _external(hpa)["vllm_saturation"]["metric"]["selector"]["matchLabels"]
    assert list(selector) == ["model_name"]
    at_zero = _with_autoscaling(
        minReplicas=0, maxReplicas=3, metrics=[{"name": "vllm_saturation", "value": 1}]
    )
    at_zero["adapter"] = {"config": copy.deepcopy(saturation)}
    result = render_many(tmp_path, {"zero": at_zero})["zero"]
    assert result.returncode != 0 and "vllm_saturation vanish with the last replica" in result.stderr


def test_scale_to_zero_refusal_names_the_model(tmp_path: Path) -> None:
    """With several models, the refusal names the one that cannot wake, by index and by name."""
    values = copy.deepcopy(ONE_MODEL)
    values["models"].append(
        {"name": "nightly", "model": "org/model", "autoscaling": {"minReplicas": 0, "maxReplicas": 2}}
    )
    result = render_many(tmp_path, {"two": values})["two"]
    assert result.returncode != 0
    assert (
        'models[1].autoscaling.minReplicas value 0 of model "nightly" needs an External metric'
        in result.stderr
    )


def test_every_builtin_metric_can_be_referenced(tmp_path: Path) -> None:
    """The chart accepts each metric of the adapter's catalogue (kept in step with
    adapter/vocabulary/catalogue.py)."""
    names = [m.name for m in catalogue.BUILTIN]
    values = _with_autoscaling(maxReplicas=4, metrics=[{"name": n, "value": 1} for n in names])
    hpa = render(tmp_path, values).one("HorizontalPodAutoscaler")
    assert list(_external(hpa)) == names


def test_gateway_metrics_scale_from_zero_without_a_model_selector(tmp_path: Path) -> None:
    """The inference gateway's queue is upstream of the replicas: it exists at zero, so it may wake a
    model (minReplicas 0), and it takes the selector given, not vLLM's default model_name one."""
    values = _with_autoscaling(
        minReplicas=0,
        maxReplicas=4,
        metrics=[
            {"name": "gateway_queue_size", "averageValue": 5, "selector": {"inference_pool": "llama-pool"}},
            {"name": "gateway_requests_running", "averageValue": 24},
        ],
    )
    hpa = render(tmp_path, values).one("HorizontalPodAutoscaler")
    assert hpa["spec"]["minReplicas"] == 0
    metrics = [m["external"]["metric"] for m in hpa["spec"]["metrics"]]
    assert metrics == [
        {"name": "gateway_queue_size", "selector": {"matchLabels": {"inference_pool": "llama-pool"}}},
        {"name": "gateway_requests_running"},
    ]


FAILURES: dict[str, tuple[dict[str, Any], str]] = {
    "maxReplicas missing": (
        _with_autoscaling(minReplicas=1),
        "models[0].autoscaling.maxReplicas is required: a cap on GPU replicas is mandatory",
    ),
    "minReplicas above maxReplicas": (
        _with_autoscaling(minReplicas=5, maxReplicas=3),
        "models[0].autoscaling.minReplicas value 5 must be at most maxReplicas (3)",
    ),
    "scale to zero on vLLM metrics only": (
        _with_autoscaling(minReplicas=0, maxReplicas=3),
        'models[0].autoscaling.minReplicas value 0 of model "m" needs an External metric that exists '
        "without replicas, defined in adapter.config.metrics (such as queue_depth on the upstream queue): "
        "Kubernetes scales from zero only on an External or Object metric, and vllm_requests_inflight "
        "vanish with the last replica",
    ),
    "metric the adapter does not serve": (
        _with_autoscaling(maxReplicas=3, metrics=[{"name": "queue_depth", "averageValue": 5}]),
        'models[0].autoscaling.metrics[0].name value "queue_depth" must be a metric the adapter serves',
    ),
}


@pytest.fixture(scope="module")
def failures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, HelmResult]:
    cases = {key: values for key, (values, _) in FAILURES.items()}
    return render_many(tmp_path_factory.mktemp("hpa"), cases)


@pytest.mark.parametrize("case", [pytest.param(key, id=key) for key in FAILURES])
def test_unsafe_autoscaling_fails_naming_the_key(case: str, failures: dict[str, HelmResult]) -> None:
    """An HPA without a cap, with min above max, stuck at zero, or on an unknown metric is refused."""
    result = failures[case]
    assert result.returncode != 0
    assert FAILURES[case][1] in result.stderr
