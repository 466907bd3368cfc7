"""templates/cert-manager-certificate-adapter.yaml and cert-manager-issuer-adapter.yaml, checked structurally
(cert-manager's CRDs have no schema in kubernetes-validate)."""

from __future__ import annotations

from pathlib import Path

from tests.helm.conftest import ADAPTER, NAMESPACE, ONE_MODEL, Rendered, render


def test_serving_certificate_covers_the_service(rendered: dict[str, Rendered]) -> None:
    """The serving Certificate is for server auth, names every DNS form of the Service, and writes the
    Secret the adapter mounts."""
    result = rendered["prometheus-cert-manager"]
    certificate = result.one("Certificate", ADAPTER)
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    spec = certificate["spec"]
    assert set(spec["dnsNames"]) >= {ADAPTER, f"{ADAPTER}.{NAMESPACE}", f"{ADAPTER}.{NAMESPACE}.svc"}
    assert "server auth" in spec["usages"]
    volumes = result.one("Deployment", ADAPTER)["spec"]["template"]["spec"]["volumes"]
    assert {"name": "serving-cert", "secret": {"secretName": spec["secretName"]}} in volumes
    assert spec["renewBefore"] and spec["duration"]


def test_chart_made_ca_chain(rendered: dict[str, Rendered]) -> None:
    """Without an issuerRef: self-signed Issuer → CA Certificate (isCA) → CA Issuer → serving Certificate."""
    result = rendered["prometheus-cert-manager"]
    issuer_ref = result.one("Certificate", ADAPTER)["spec"]["issuerRef"]
    assert issuer_ref["kind"] == "Issuer"
    ca_issuer = result.one("Issuer", issuer_ref["name"])
    ca_certificate = next(
        c
        for c in result.find("Certificate")
        if c["spec"].get("secretName") == ca_issuer["spec"]["ca"]["secretName"]
    )
    assert ca_certificate["spec"]["isCA"] is True
    root = result.one("Issuer", ca_certificate["spec"]["issuerRef"]["name"])
    assert root["spec"] == {"selfSigned": {}}


def test_given_issuer_is_used_as_is(tmp_path: Path) -> None:
    """With an issuerRef (e.g. a ClusterIssuer) the chart
    creates no Issuers and uses it for the certificate."""
    issuer = {"name": "cluster-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    values = {**ONE_MODEL, "adapter": {"tls": {"mode": "certManager", "certManager": {"issuerRef": issuer}}}}
    result = render(tmp_path, values)
    assert result.find("Issuer") == []
    assert result.one("Certificate", ADAPTER)["spec"]["issuerRef"] == issuer
