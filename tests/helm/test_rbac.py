"""templates/rbac-*.yaml: what the aggregated API needs (auth delegation, the authentication ConfigMap), what
the HPA controller needs (reading external metrics), and what the scrape source needs (discovery)."""

from __future__ import annotations

from pathlib import Path

from tests.helm.conftest import ADAPTER, NAMESPACE, Doc, Rendered, render

ADAPTER_SA = {"kind": "ServiceAccount", "name": ADAPTER, "namespace": NAMESPACE}


def _binding_to(result: Rendered, kind: str, role: str) -> Doc:
    (binding,) = [b for b in result.find(kind) if b["roleRef"]["name"] == role]
    return binding


def test_adapter_may_delegate_authentication_and_authorization(rendered: dict[str, Rendered]) -> None:
    """system:auth-delegator is bound to the adapter's ServiceAccount (TokenReview, SubjectAccessReview)."""
    binding = _binding_to(rendered["single-model"], "ClusterRoleBinding", "system:auth-delegator")
    assert binding["roleRef"]["kind"] == "ClusterRole"
    assert binding["subjects"] == [ADAPTER_SA]


def test_adapter_may_read_the_authentication_configmap(rendered: dict[str, Rendered]) -> None:
    """extension-apiserver-authentication-reader is bound in kube-system, where that ConfigMap lives."""
    binding = _binding_to(
        rendered["single-model"], "RoleBinding", "extension-apiserver-authentication-reader"
    )
    assert binding["metadata"]["namespace"] == "kube-system"
    assert binding["roleRef"]["kind"] == "Role"
    assert binding["subjects"] == [ADAPTER_SA]


def test_hpa_controller_may_read_external_metrics(rendered: dict[str, Rendered]) -> None:
    """The HPA controller's ServiceAccount may get external metrics (the adapter authorizes each request)."""
    result = rendered["single-model"]
    role = result.one("ClusterRole", f"{ADAPTER}-external-metrics-reader")
    assert role["rules"] == [
        {"apiGroups": ["external.metrics.k8s.io"], "resources": ["*"], "verbs": ["get", "list", "watch"]}
    ]
    binding = _binding_to(result, "ClusterRoleBinding", role["metadata"]["name"])
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "horizontal-pod-autoscaler", "namespace": "kube-system"}
    ]


def _discovery_rules(result: Rendered) -> set[tuple[str, str]]:
    role = result.one("ClusterRole", f"{ADAPTER}-discovery")
    return {
        (group, resource)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


def test_scrape_source_reads_endpointslices_cluster_wide(rendered: dict[str, Rendered]) -> None:
    """Scrape discovery in every namespace: EndpointSlices through a ClusterRoleBinding. No pod read: a
    pod listing returns whole pod specs, and only scrape.pod_labels (a disaggregated model's role label,
    tests/helm/test_disaggregated.py) needs one."""
    result = rendered["two-models-pools"]
    assert _discovery_rules(result) == {("discovery.k8s.io", "endpointslices")}
    binding = _binding_to(result, "ClusterRoleBinding", f"{ADAPTER}-discovery")
    assert binding["subjects"] == [ADAPTER_SA]


def test_scrape_source_limited_to_listed_namespaces(rendered: dict[str, Rendered]) -> None:
    """With discovery_namespaces, discovery is granted by RoleBindings in those namespaces only."""
    result = rendered["scrape-source"]
    assert _discovery_rules(result)
    assert [
        b for b in result.find("ClusterRoleBinding") if b["roleRef"]["name"] == f"{ADAPTER}-discovery"
    ] == []
    binding = _binding_to(result, "RoleBinding", f"{ADAPTER}-discovery")
    assert binding["metadata"]["namespace"] == "inference"
    assert binding["subjects"] == [ADAPTER_SA]


def test_prometheus_source_gets_no_discovery_rights(rendered: dict[str, Rendered]) -> None:
    """The Prometheus source reads nothing from the cluster but authentication data."""
    assert rendered["single-model"].find("ClusterRole", f"{ADAPTER}-discovery") == []


def test_rbac_can_be_left_to_the_cluster_admin(tmp_path: Path) -> None:
    """rbac.create false renders no roles or bindings."""
    result = render(tmp_path, {"rbac": {"create": False}})
    for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
        assert result.find(kind) == []
