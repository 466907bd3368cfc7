"""templates/monitoring-*.yaml: prometheus-operator monitors, checked structurally (CRDs), so that every vLLM
series carries the `namespace` and `pod` labels the adapter's matchers and the alerts rely on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helm.conftest import Doc, Rendered, render

REQUIRED_TARGET_LABELS = {"__meta_kubernetes_namespace": "namespace", "__meta_kubernetes_pod_name": "pod"}


def _relabeled(endpoint: Doc) -> dict[str, str]:
    return {r["sourceLabels"][0]: r["targetLabel"] for r in endpoint.get("relabelings", [])}


def _vllm_pod_labels(result: Rendered) -> list[dict[str, str]]:
    return [
        d["spec"]["template"]["metadata"]["labels"]
        for d in result.find("Deployment")
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == "vllm"
    ]


def test_podmonitor_scrapes_every_vllm_pod(rendered: dict[str, Rendered]) -> None:
    """The PodMonitor selects every model's pods, scrapes /metrics on the named port and relabels
    namespace and pod; the configured Prometheus selector labels are on it."""
    result = rendered["single-model"]
    (monitor,) = result.find("PodMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    selector = monitor["spec"]["selector"]["matchLabels"]
    for labels in _vllm_pod_labels(result):
        assert selector.items() <= labels.items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
    assert endpoint["honorLabels"] is False
    assert REQUIRED_TARGET_LABELS.items() <= _relabeled(endpoint).items()


def test_servicemonitor_alternative(rendered: dict[str, Rendered]) -> None:
    """kind ServiceMonitor selects the vLLM Services and relabels the same target labels."""
    result = rendered["prometheus-cert-manager"]
    assert result.find("PodMonitor") == []
    monitor = next(m for m in result.find("ServiceMonitor") if m["metadata"]["name"].endswith("-vllm"))
    selector = monitor["spec"]["selector"]["matchLabels"]
    services = [
        s for s in result.find("Service") if s["metadata"]["labels"]["app.kubernetes.io/component"] == "vllm"
    ]
    assert services
    for service in services:
        assert selector.items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "http"
    assert REQUIRED_TARGET_LABELS.items() <= _relabeled(endpoint).items()


def test_adapter_servicemonitor_verifies_the_serving_certificate(rendered: dict[str, Rendered]) -> None:
    """The adapter's own metrics are scraped over HTTPS, verified against the CA in its TLS Secret."""
    result = rendered["single-model"]
    monitor = result.one("ServiceMonitor", "demo-vllm-autoscale-adapter")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["scheme"], endpoint["path"]) == ("https", "https", "/metrics")
    assert endpoint["tlsConfig"]["ca"]["secret"] == {
        "name": "demo-vllm-autoscale-adapter-tls",
        "key": "ca.crt",
    }
    assert endpoint["tlsConfig"]["serverName"] == "demo-vllm-autoscale-adapter.inference.svc"
    service = result.one("Service", "demo-vllm-autoscale-adapter")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()


@pytest.mark.parametrize("kind", ["PodMonitor", "ServiceMonitor"])
def test_monitoring_disabled_needs_no_crds(kind: str, rendered: dict[str, Rendered]) -> None:
    """monitoring.enabled false renders no prometheus-operator objects (clusters without its CRDs)."""
    assert rendered["scrape-source"].find(kind) == []


def _adapter_args(result: Rendered) -> list[str]:
    deployment = next(
        d
        for d in result.find("Deployment")
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == "adapter"
    )
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def test_adapter_metrics_need_authorization_by_default(rendered: dict[str, Rendered]) -> None:
    """Like a Kubernetes component, the adapter authorizes GET /metrics: Prometheus sends its own token
    and its service account is granted the non-resource URL; /metrics is not an always-allowed path."""
    result = rendered["defaults"]
    allow = next(a for a in _adapter_args(result) if a.startswith("--authorization-always-allow-paths="))
    assert allow.split("=", 1)[1].split(",") == ["/healthz", "/livez", "/readyz"]
    (endpoint,) = result.one("ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    role = next(r for r in result.find("ClusterRole") if r["metadata"]["name"].endswith("-metrics-scraper"))
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    binding = next(
        b for b in result.find("ClusterRoleBinding") if b["metadata"]["name"].endswith("-metrics-scraper")
    )
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kube-prometheus-stack-prometheus", "namespace": "monitoring"}
    ]


def test_adapter_metrics_can_be_served_without_authentication(tmp_path: Path) -> None:
    """`authorization: none` adds /metrics to the always-allowed paths and drops the token and the role."""
    result = render(tmp_path, {"monitoring": {"adapter": {"authorization": "none"}}})
    allow = next(a for a in _adapter_args(result) if a.startswith("--authorization-always-allow-paths="))
    assert allow.endswith(",/metrics")
    (endpoint,) = result.one("ServiceMonitor")["spec"]["endpoints"]
    assert "bearerTokenFile" not in endpoint
    assert not [r for r in result.find("ClusterRole") if r["metadata"]["name"].endswith("-metrics-scraper")]
