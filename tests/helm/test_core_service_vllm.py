"""templates/core-service-vllm.yaml and policy-poddisruptionbudget-vllm.yaml: per-model Service and PDB."""

from __future__ import annotations

from tests.helm.conftest import Rendered, models_of


def test_each_model_has_a_service_selecting_only_its_pods(rendered: dict[str, Rendered]) -> None:
    """A model's Service selects exactly that model's pods, on the named port "http"."""
    result = rendered["two-models-pools"]
    deployments = list(models_of(result))
    assert len(deployments) == 2
    for deployment in deployments:
        service = result.one("Service", deployment["metadata"]["name"])
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= labels.items()
        others = [d for d in deployments if d is not deployment]
        for other in others:
            assert (
                not service["spec"]["selector"].items()
                <= other["spec"]["template"]["metadata"]["labels"].items()
            )
        assert service["spec"]["ports"][0]["name"] == "http"
        assert service["metadata"]["labels"]["app.kubernetes.io/component"] == "vllm"


def test_pdb_per_model_unless_disabled(rendered: dict[str, Rendered]) -> None:
    """A model gets a PDB allowing one eviction at a time, unless it turned its PDB off."""
    result = rendered["two-models-pools"]
    pdb = result.one("PodDisruptionBudget", "demo-vllm-autoscale-llama-70b")
    assert pdb["spec"]["maxUnavailable"] == 1
    deployment = result.one("Deployment", "demo-vllm-autoscale-llama-70b")
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"]
    assert result.find("PodDisruptionBudget", "demo-vllm-autoscale-qwen-small") == []
